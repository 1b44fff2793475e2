import { QueryClientProvider } from "@tanstack/react-query";
import { render } from "@testing-library/react";
import { makeQueryClient } from "../queryClient";
import type {
  AccessTokenRow,
  EntryDetail,
  EntryPage,
  EvidenceReviewDetail,
  EvidenceReviewPage,
  RetrievalEventDetail,
  RetrievalEventList,
  SharingRequestView,
  SourceView,
} from "../bindings";

/** Renders with a fresh query client (no retries, no cache between tests). */
export function renderWithQuery(ui: React.ReactElement) {
  const client = makeQueryClient();
  return render(<QueryClientProvider client={client}>{ui}</QueryClientProvider>);
}

export const entryPage: EntryPage = {
  entries: [
    {
      entry_id: "01900000-0000-7000-8000-000000000001",
      runtime_agent_id: "agent",
      agent_name: "mesh-assistant",
      state: "live",
      always_on: false,
      restriction: "none",
      current_revision_id: "01900000-0000-7000-8000-0000000000a1",
      revision_number: 2,
      body_preview: "Leads the platform team since October (previously payments).",
      subject: "a1",
      subject_label: "Dana (id U321)",
      updated_at: "2026-12-02T10:00:00Z",
      evidence_unknown: false,
    },
    {
      entry_id: "01900000-0000-7000-8000-000000000002",
      runtime_agent_id: "agent",
      agent_name: "mesh-assistant",
      state: "live",
      always_on: false,
      restriction: "none",
      current_revision_id: "01900000-0000-7000-8000-0000000000a2",
      revision_number: 1,
      body_preview: "The Q3 budget review moved to Thursday.",
      subject: null,
      subject_label: null,
      updated_at: "2026-12-02T09:00:00Z",
      evidence_unknown: true,
    },
  ],
  next_after: "01900000-0000-7000-8000-000000000002",
};

const knownSource = (id: string, message: string): SourceView => ({
  id,
  kind: "message",
  message_id: message,
  conversation_id: "conv",
  parent_revision_id: null,
  evidence: { state: "known", actors: ["a1", "a2"], labels: ["Dana (id U321)", "Victor (id U123)"] },
  evidence_basis: "conversation members when the message was sent",
});

export const entryDetail: EntryDetail = {
  entry_id: "01900000-0000-7000-8000-000000000001",
  runtime_agent_id: "agent",
  state: "live",
  always_on: false,
  restriction: "none",
  restricted_conversation_id: null,
  origin_conversation_id: "conv",
  current_revision_id: "rev-2",
  revisions: [
    {
      id: "rev-1",
      revision_number: 1,
      operation: "create",
      body: "Leads the payments team.",
      subject: "a1",
      subject_label: "Dana (id U321)",
      source_actor: "a1",
      source_label: "Dana (id U321)",
      created_at: "2026-12-01T10:00:00Z",
      learned_at: "2026-12-01T09:59:00Z",
      erased: null,
      sources: [knownSource("s1", "m1")],
    },
    {
      id: "rev-2",
      revision_number: 2,
      operation: "amend",
      body: "Leads the platform team.",
      subject: "a1",
      subject_label: "Dana Smith (id U321)",
      source_actor: "a1",
      source_label: "Dana (id U321)",
      created_at: "2026-12-02T10:00:00Z",
      learned_at: "2026-12-02T09:58:00Z",
      erased: null,
      sources: [
        knownSource("s2", "m1"),
        knownSource("s2-copy", "m1"),
        {
          id: "s3",
          kind: "retrieved_revision",
          message_id: null,
          conversation_id: null,
          parent_revision_id: "other-rev",
          evidence: { state: "unknown" },
          evidence_basis: "that revision has a source of unknown audience",
        },
      ],
    },
  ],
  messages: [
    {
      id: "m1",
      conversation_id: "conv",
      conversation_title: "#engineering",
      direction: "inbound",
      sender: "a1",
      sender_name: "Dana",
      authenticated: true,
      sent_at: "2026-12-01T09:59:00Z",
      excerpt: "I lead the payments team.",
      erased: null,
    },
  ],
  linked_revisions: [
    {
      id: "other-rev",
      entry_id: "e9",
      revision_number: 1,
      learned_at: "2026-11-20T08:00:00Z",
      body_preview: "Forwarded budget note",
      erased: null,
    },
  ],
};

export const eventPage: RetrievalEventList = {
  events: [
    {
      id: "ev-1",
      runtime_agent_id: "agent",
      agent_name: "mesh-assistant",
      conversation_id: "conv",
      conversation_title: "#engineering",
      mode: "prompt",
      destination_audience: ["a3", "a4"],
      audience_labels: ["Victor (id U123)", "Priya (id U456)"],
      selected_count: 2,
      candidate_count: 7,
      cost_tokens: 120,
      token_budget: 4096,
      degradation_category: "semantic_unavailable",
      degradation_categories: ["semantic_unavailable"],
      created_at: "2026-12-02T10:00:00Z",
    },
  ],
  next_after: null,
};

export const eventDetail: RetrievalEventDetail = {
  event_id: "ev-1",
  agent: "agent",
  conversation: "conv",
  current_actor: "a3",
  mode: "prompt",
  has_query_digest: true,
  query_was_empty: false,
  destination_audience: ["a3", "a4"],
  audience_labels: ["Victor (id U123)", "Priya (id U456)"],
  selections: [
    {
      entry_id: "01900000-0000-7000-8000-000000000001",
      revision_id: "rev-2",
      revision_number: 2,
      learned_at: "2026-12-02T09:58:00Z",
      score: 0.05,
      components: {
        sources: ["lexical", "conversation"],
        lexical: { rank: 1, rrf: 0.0164 },
        semantic: null,
        subject_boost: 0,
        conversation_boost: 0.02,
        recency: 0.0136,
        period_boost: 0,
        always_on: 0,
      },
      reason: "matched the query (lexical rank 1); formed in this conversation",
      cost_tokens: 60,
    },
  ],
  skipped: [{ entry_id: "big-entry", revision_id: "big-rev", cost_tokens: 5000, reason: "larger_than_allowance" }],
  withheld: { eligibility_withheld_unknown: 3 },
  candidate_count: 7,
  cost_tokens: 60,
  cost_bound: "bytes",
  token_budget: 4096,
  count_budget: 8,
  elapsed_micros: 4200,
  degradation_category: "semantic_unavailable",
  degradation_categories: ["semantic_unavailable"],
  created_at: "2026-12-02T10:00:00Z",
};

export const pendingRequest: SharingRequestView = {
  id: "req-1",
  state: "pending",
  runtime_agent_id: "agent",
  agent_name: "mesh-assistant",
  revision_id: "rev-9",
  entry_id: "entry-9",
  revision_number: 1,
  body: "Wants to be paged on Slack, never by phone.",
  revision_is_current: true,
  requested_by: "Alex",
  requested_in: "DM with Alex (U790)",
  target_conversation: "#engineering",
  rationale: "Alex asked me to tell the team.",
  proposed_audience: ["a4", "a3"],
  proposed_audience_names: ["Priya (id U456)", "Victor (id U123)"],
  missing_voices: ["a9"],
  missing_voice_names: ["Alex (id U790)"],
  created_at: "2026-12-02T10:00:00Z",
  expires_at: "2026-12-09T10:00:00Z",
  decided_at: null,
  decided_by: null,
  decision_reason: null,
};

export const reviewPage: EvidenceReviewPage = {
  items: [
    {
      revision_id: "rev-q3",
      entry_id: "entry-q3",
      runtime_agent_id: "agent",
      agent_name: "mesh-assistant",
      revision_number: 1,
      body_preview: "The Q3 budget review moved to Thursday.",
      subject_label: null,
      created_at: "2026-12-02T09:00:00Z",
      unknown_sources: 1,
      unknown_source_kinds: ["message"],
      evidence_bases: ["conversation topology is not proven"],
    },
  ],
  next_after: null,
};

export const reviewDetail: EvidenceReviewDetail = {
  revision_id: "rev-q3",
  entry_id: "entry-q3",
  runtime_agent_id: "agent",
  revision_number: 1,
  body: "The Q3 budget review moved to Thursday.",
  sources: [
    {
      source_id: "src-q3",
      kind: "message",
      evidence_basis: "conversation topology is not proven",
      message_id: "m-q3",
      conversation_title: "Forwarded email thread",
      conversation_topology: "unknown",
      sender: "a3",
      sender_authenticated: false,
      sent_at: "2026-12-02T08:59:00Z",
      excerpt: "FYI the Q3 budget review moved to Thursday.",
      parent_revision_id: null,
      members_when_sent: [],
      kept_unknown_by: null,
      kept_unknown_at: null,
      kept_unknown_note: null,
    },
  ],
  audience_choices: [
    { id: "a4", kind: "human", label: "Priya (id U456)" },
    { id: "a3", kind: "human", label: "Victor (id U123)" },
  ],
};

export const liveToken: AccessTokenRow = {
  id: "01900000-0000-7000-8000-0000000000t1",
  runtime_agent_id: "agent",
  agent_name: "mesh-assistant",
  conversation_id: "conv",
  conversation: "C-ENG",
  conversation_title: "#engineering",
  actor_id: "a4",
  speaker: "U456",
  speaker_label: "Priya (id U456)",
  label: "Priya's laptop (Claude Desktop)",
  created_at: "2026-12-05T10:00:00Z",
  last_used_at: null,
  revoked_at: null,
  expires_at: null,
};

export const revokedToken: AccessTokenRow = {
  ...liveToken,
  id: "01900000-0000-7000-8000-0000000000t2",
  label: "",
  conversation_title: "",
  conversation: "D-VICTOR",
  speaker: "U123",
  speaker_label: "Victor (id U123)",
  created_at: "2026-12-04T10:00:00Z",
  last_used_at: "2026-12-04T11:00:00Z",
  revoked_at: "2026-12-04T12:00:00Z",
};
