import { beforeEach, describe, expect, it, vi } from "vitest";
import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { commands } from "../bindings";
import {
  entryDetail,
  entryPage,
  eventDetail,
  eventPage,
  pendingRequest,
  renderWithQuery,
  reviewDetail,
  reviewPage,
} from "../test/fixtures";
import { chartRows, ScoreChart } from "../components/ScoreChart";
import { reviewDecision } from "./EvidenceReview";
import { SignIn } from "./SignIn";
import { MemoryBrowser } from "./MemoryBrowser";
import { EntryDetailView } from "./EntryDetail";
import { RetrievalEvents } from "./RetrievalEvents";
import { SharingQueue } from "./SharingQueue";
import { EvidenceReview } from "./EvidenceReview";
import { ExplainView } from "./Explain";

// Component tests replace the IPC layer only; the real command layer is covered by the
// end-to-end suite (scripts/test-console.sh).
vi.mock("../bindings", () => ({
  commands: {
    consoleStatus: vi.fn(),
    createFirstOperator: vi.fn(),
    signIn: vi.fn(),
    signOut: vi.fn(),
    disconnect: vi.fn(),
    listAgents: vi.fn(),
    listSubjects: vi.fn(),
    listConversations: vi.fn(),
    browseEntries: vi.fn(),
    entryDetail: vi.fn(),
    evidenceReview: vi.fn(),
    evidenceReviewDetail: vi.fn(),
    reviewSourceEvidence: vi.fn(),
    retrievalEvents: vi.fn(),
    retrievalEvent: vi.fn(),
    explain: vi.fn(),
    sharingRequests: vi.fn(),
    decideSharingRequest: vi.fn(),
  },
}));

const mocked = vi.mocked(commands);
const status = {
  connected: true,
  scripted: false,
  schema_notice: null,
  database_error: null,
  embedded: true,
  database_label: "/tmp/run / mesh",
  needs_first_operator: true,
  session: null,
  session_ended: null,
};
const operator = {
  role: "ops_alice",
  can_browse: true,
  can_approve: true,
  can_review_evidence: true,
  can_revoke_tokens: true,
  can_erase: false,
  erase_limitation: "role is not a member of mesh_eraser",
  limitation: null,
};
const reader = {
  role: "console_reader",
  can_browse: true,
  can_approve: false,
  can_review_evidence: false,
  can_revoke_tokens: false,
  can_erase: false,
  erase_limitation: "role is not a member of mesh_eraser",
  limitation: "role console_reader is not a member of mesh_operator, so it can browse but not approve",
};

beforeEach(() => {
  vi.resetAllMocks();
  mocked.listAgents.mockResolvedValue([{ id: "agent", name: "mesh-assistant", live_entries: 9 }]);
  mocked.listSubjects.mockResolvedValue([{ id: "a1", kind: "human", label: "Dana (id U321)" }]);
  mocked.listConversations.mockResolvedValue([
    { id: "conv", runtime_agent_id: "agent", title: "#engineering", topology: "channel", connector: "slack" },
  ]);
});

describe("SignIn", () => {
  it("on first run creates the operator role with the chosen name and password", async () => {
    mocked.createFirstOperator.mockResolvedValue(operator);
    renderWithQuery(<SignIn status={status} />);
    expect(screen.getByText(/First run/)).toBeTruthy();
    await userEvent.type(screen.getByLabelText("Role name"), "ops_alice");
    await userEvent.type(screen.getByLabelText("Password"), "correct-horse-battery");
    await userEvent.type(screen.getByLabelText("Repeat password"), "correct-horse-battery");
    await userEvent.click(screen.getByRole("button", { name: "Create role and sign in" }));
    await waitFor(() => expect(mocked.createFirstOperator).toHaveBeenCalledWith("ops_alice", "correct-horse-battery"));
    expect(mocked.signIn).not.toHaveBeenCalled();
  });

  it("refuses differing passwords before asking the backend", async () => {
    renderWithQuery(<SignIn status={status} />);
    await userEvent.type(screen.getByLabelText("Role name"), "ops_alice");
    await userEvent.type(screen.getByLabelText("Password"), "correct-horse-battery");
    await userEvent.type(screen.getByLabelText("Repeat password"), "something-else-entirely");
    expect(screen.getByRole("alert").textContent).toMatch(/passwords differ/);
    expect((screen.getByRole("button", { name: "Create role and sign in" }) as HTMLButtonElement).disabled).toBe(true);
  });

  it("shows the backend's reason when sign-in fails", async () => {
    mocked.signIn.mockRejectedValue({ kind: "not_signed_in", message: "sign-in failed: wrong role name or password" });
    renderWithQuery(<SignIn status={{ ...status, needs_first_operator: false }} />);
    await userEvent.type(screen.getByLabelText("Role name"), "ops_alice");
    await userEvent.type(screen.getByLabelText("Password"), "nope");
    await userEvent.click(screen.getByRole("button", { name: "Sign in" }));
    expect((await screen.findByRole("alert")).textContent).toMatch(/wrong role name or password/);
  });

  it("offers the connection screen again, except for a DATABASE_URL console", async () => {
    mocked.disconnect.mockResolvedValue(null);
    const { unmount } = renderWithQuery(<SignIn status={{ ...status, needs_first_operator: false }} />);
    await userEvent.click(screen.getByTestId("back-to-connections"));
    await waitFor(() => expect(mocked.disconnect).toHaveBeenCalled());
    unmount();
    renderWithQuery(<SignIn status={{ ...status, needs_first_operator: false, scripted: true }} />);
    expect(screen.queryByTestId("back-to-connections")).toBeNull();
  });
});

describe("MemoryBrowser", () => {
  it("shows loading, then rows; arrow keys and Enter open an entry", async () => {
    mocked.browseEntries.mockResolvedValue(entryPage);
    const onOpen = vi.fn();
    renderWithQuery(<MemoryBrowser onOpen={onOpen} />);
    expect(screen.getByRole("status").textContent).toMatch(/Loading memory/);
    const table = await screen.findByRole("table", { name: "Memory entries" });
    const rows = within(table).getAllByRole("row").slice(1);
    expect(rows).toHaveLength(2);
    expect(within(rows[1]).getByText("evidence unknown")).toBeTruthy();
    rows[0].focus();
    fireEvent.keyDown(rows[0], { key: "ArrowDown" });
    expect(document.activeElement).toBe(rows[1]);
    fireEvent.keyDown(rows[1], { key: "Enter" });
    expect(onOpen).toHaveBeenCalledWith(entryPage.entries[1].entry_id);
  });

  it("pages with the keyset cursor and sends filters", async () => {
    mocked.browseEntries.mockResolvedValueOnce(entryPage).mockResolvedValueOnce({ entries: [], next_after: null });
    renderWithQuery(<MemoryBrowser onOpen={() => {}} />);
    await userEvent.click(await screen.findByRole("button", { name: "Load more" }));
    await waitFor(() => expect(mocked.browseEntries).toHaveBeenCalledTimes(2));
    expect(mocked.browseEntries.mock.calls[1][1]).toBe(entryPage.next_after);
    mocked.browseEntries.mockResolvedValue({ entries: [], next_after: null });
    await userEvent.selectOptions(screen.getByLabelText("State"), "forgotten");
    await waitFor(() =>
      expect(mocked.browseEntries).toHaveBeenLastCalledWith({ agent: null, subject: null, state: "forgotten", text: null }, null),
    );
    expect(await screen.findByText(/No memory matches/)).toBeTruthy();
  });

  it("shows an error with a retry", async () => {
    mocked.browseEntries.mockRejectedValue({ kind: "database", message: "database error: connection refused" });
    renderWithQuery(<MemoryBrowser onOpen={() => {}} />);
    expect((await screen.findByRole("alert")).textContent).toMatch(/connection refused/);
    mocked.browseEntries.mockResolvedValue(entryPage);
    await userEvent.click(screen.getByRole("button", { name: "Retry" }));
    expect(await screen.findByRole("table", { name: "Memory entries" })).toBeTruthy();
  });
});

describe("EntryDetailView", () => {
  it("diffs body and subject between revisions", async () => {
    mocked.entryDetail.mockResolvedValue(entryDetail);
    renderWithQuery(<EntryDetailView entryId={entryDetail.entry_id} session={operator} onClose={() => {}} />);
    const rev2 = await screen.findByTestId("revision-2");
    expect(within(rev2).getByText("payments", { selector: "del" })).toBeTruthy();
    expect(within(rev2).getByText("platform", { selector: "ins" })).toBeTruthy();
    expect(within(rev2).getByTestId("subject-diff").textContent).toBe("Dana (id U321) → Dana Smith (id U321)");
    expect(within(screen.getByTestId("revision-1")).queryByTestId("body-diff")).toBeNull();
  });

  it("shows the day each revision was learned, as the memory line says it", async () => {
    mocked.entryDetail.mockResolvedValue(entryDetail);
    renderWithQuery(<EntryDetailView entryId={entryDetail.entry_id} session={operator} onClose={() => {}} />);
    const rev1 = await screen.findByTestId("revision-1");
    expect(within(rev1).getByTestId("learned-at").textContent).toMatch(/Learned 1 December 2026/);
    expect(within(screen.getByTestId("revision-2")).getByTestId("learned-at").textContent).toMatch(/2 December 2026/);
  });

  it("shows each distinct lineage source once, with its audience evidence", async () => {
    mocked.entryDetail.mockResolvedValue(entryDetail);
    renderWithQuery(<EntryDetailView entryId={entryDetail.entry_id} session={operator} onClose={() => {}} />);
    await userEvent.click(await screen.findByRole("tab", { name: "Lineage" }));
    expect(screen.getByTestId("lineage-graph")).toBeTruthy();
    const items = within(screen.getByRole("list", { name: "Lineage sources" })).getAllByRole("listitem");
    expect(items).toHaveLength(2);
    expect(items[0].textContent).toMatch(/audience: Dana \(id U321\), Victor \(id U123\)/);
    expect(items[1].textContent).toMatch(/audience UNKNOWN/);
  });
});

describe("RetrievalEvents", () => {
  it("lists events with audience and degradation, and shows components, skipped and withheld counts", async () => {
    mocked.retrievalEvents.mockResolvedValue(eventPage);
    mocked.retrievalEvent.mockResolvedValue(eventDetail);
    renderWithQuery(<RetrievalEvents onOpenEntry={() => {}} />);
    const table = await screen.findByRole("table", { name: "Retrieval events" });
    expect(within(table).getByText("semantic_unavailable")).toBeTruthy();
    expect(within(table).getByText("Victor (id U123), Priya (id U456)")).toBeTruthy();
    await userEvent.click(within(table).getAllByRole("row")[1]);
    const detail = await screen.findByTestId("event-detail");
    expect(mocked.retrievalEvent).toHaveBeenCalledWith("ev-1");
    const bars = within(screen.getByTestId("score-chart")).getAllByText(/: 0\.\d{4}/, { selector: "title" });
    expect(bars.map((b) => b.textContent)).toEqual([
      "Lexical (RRF): 0.0164",
      "Conversation boost: 0.0200",
      "Recency: 0.0136",
    ]);
    expect(within(detail).getByTestId("selection-learned-at").textContent).toBe("2 December 2026");
    expect(within(detail).getByTestId("skipped").textContent).toMatch(/5000 tokens \(larger than allowance\)/);
    expect(within(detail).getByTestId("withheld").textContent).toMatch(/eligibility_withheld_unknown × 3/);
  });
});

describe("SharingQueue", () => {
  it("asks for pending requests first, and for every state with null when All is chosen", async () => {
    mocked.sharingRequests.mockResolvedValue([pendingRequest]);
    renderWithQuery(<SharingQueue session={operator} onOpenEntry={() => {}} />);
    await screen.findByTestId("request-req-1");
    expect(mocked.sharingRequests).toHaveBeenLastCalledWith("pending");
    await userEvent.selectOptions(screen.getByRole("combobox"), "all");
    await waitFor(() => expect(mocked.sharingRequests).toHaveBeenLastCalledWith(null));
  });

  it("approves with a reason and reports who decided", async () => {
    mocked.sharingRequests.mockResolvedValue([pendingRequest]);
    mocked.decideSharingRequest.mockResolvedValue({
      request_id: "req-1",
      state: "approved",
      grant_id: "grant-1",
      decided_by: "ops_alice",
    });
    renderWithQuery(<SharingQueue session={operator} onOpenEntry={() => {}} />);
    const card = await screen.findByTestId("request-req-1");
    expect(within(card).getByTestId("proposed-audience").textContent).toBe("Priya (id U456), Victor (id U123)");
    expect(within(card).getByTestId("missing-voices").textContent).toMatch(/^Alex \(id U790\) to confirm/);
    const approve = within(card).getByRole("button", { name: "Approve" }) as HTMLButtonElement;
    expect(approve.disabled).toBe(true);
    await userEvent.type(within(card).getByRole("textbox"), "verified with Alex");
    await userEvent.click(approve);
    await waitFor(() => expect(mocked.decideSharingRequest).toHaveBeenCalledWith("req-1", true, "verified with Alex"));
    expect((await screen.findByTestId("decision-result")).textContent).toMatch(/approved by ops_alice/);
  });

  it("cannot approve a request whose revision is no longer current", async () => {
    mocked.sharingRequests.mockResolvedValue([{ ...pendingRequest, revision_is_current: false }]);
    renderWithQuery(<SharingQueue session={operator} onOpenEntry={() => {}} />);
    const card = await screen.findByTestId("request-req-1");
    await userEvent.type(within(card).getByRole("textbox"), "looks fine");
    expect((within(card).getByRole("button", { name: "Approve" }) as HTMLButtonElement).disabled).toBe(true);
    expect(within(card).getByRole("note").textContent).toMatch(/no longer be approved/);
    expect((within(card).getByRole("button", { name: "Deny" }) as HTMLButtonElement).disabled).toBe(false);
  });

  it("says a refused approval was not written, and refreshes the queue", async () => {
    mocked.sharingRequests.mockResolvedValueOnce([pendingRequest]).mockResolvedValue([]);
    mocked.decideSharingRequest.mockRejectedValue({
      kind: "conflict",
      message: "already decided (approved by ops_bob); nothing was written",
    });
    renderWithQuery(<SharingQueue session={operator} onOpenEntry={() => {}} />);
    const card = await screen.findByTestId("request-req-1");
    await userEvent.type(within(card).getByRole("textbox"), "verified with Alex");
    await userEvent.click(within(card).getByRole("button", { name: "Approve" }));
    const refused = await screen.findByTestId("decision-refused");
    expect(refused.textContent).toMatch(/was not approved: already decided \(approved by ops_bob\); nothing was written/);
    await waitFor(() => expect(mocked.sharingRequests).toHaveBeenCalledTimes(2));
    expect(await screen.findByText(/No pending requests/)).toBeTruthy();
    expect(screen.getByTestId("decision-refused")).toBeTruthy();
    expect(screen.queryByTestId("decision-result")).toBeNull();
  });

  it("keeps other failures on the card", async () => {
    mocked.sharingRequests.mockResolvedValue([pendingRequest]);
    mocked.decideSharingRequest.mockRejectedValue({ kind: "database", message: "database error: connection reset" });
    renderWithQuery(<SharingQueue session={operator} onOpenEntry={() => {}} />);
    const card = await screen.findByTestId("request-req-1");
    await userEvent.type(within(card).getByRole("textbox"), "ok");
    await userEvent.click(within(card).getByRole("button", { name: "Approve" }));
    expect((await within(card).findByRole("alert")).textContent).toMatch(/connection reset/);
    expect(screen.queryByTestId("decision-refused")).toBeNull();
  });

  it("tells a role without operator rights why it cannot decide", async () => {
    mocked.sharingRequests.mockResolvedValue([pendingRequest]);
    renderWithQuery(<SharingQueue session={reader} onOpenEntry={() => {}} />);
    const card = await screen.findByTestId("request-req-1");
    expect(within(card).getByRole("note").textContent).toMatch(/not a member of mesh_operator/);
    expect((within(card).getByRole("button", { name: "Approve" }) as HTMLButtonElement).disabled).toBe(true);
    expect((within(card).getByRole("button", { name: "Deny" }) as HTMLButtonElement).disabled).toBe(true);
  });
});

describe("EvidenceReview and Explain", () => {
  it("lists revisions with unknown evidence, or says none are waiting", async () => {
    mocked.evidenceReview.mockResolvedValueOnce({ items: [], next_after: null });
    renderWithQuery(<EvidenceReview session={operator} onOpenEntry={() => {}} />);
    expect(await screen.findByText(/No memory is waiting/)).toBeTruthy();
  });

  it("explains which rule rejects an entry in a conversation", async () => {
    mocked.browseEntries.mockResolvedValue(entryPage);
    mocked.explain.mockResolvedValue({
      entry_id: entryPage.entries[1].entry_id,
      revision_id: "rev",
      eligible: false,
      rule: "unknown_evidence",
      explanation: "withheld: source s has unknown audience evidence (needs review or a sharing grant)",
      audience: ["Victor (id U123)"],
      failing_source: { source_id: "s", kind: "message", evidence_basis: "conversation topology is not proven", missing_actors: [] },
    });
    renderWithQuery(<ExplainView />);
    await screen.findByRole("option", { name: /Q3 budget/ });
    await screen.findByRole("option", { name: /#engineering/ });
    await userEvent.selectOptions(screen.getByTestId("explain-entry"), entryPage.entries[1].entry_id);
    await userEvent.selectOptions(screen.getByTestId("explain-conversation"), "conv");
    await userEvent.click(screen.getByRole("button", { name: "Explain" }));
    const verdict = await screen.findByTestId("explain-verdict");
    expect(mocked.explain).toHaveBeenCalledWith(entryPage.entries[1].entry_id, "conv");
    expect(verdict.textContent).toMatch(/Not eligible/);
    expect(verdict.textContent).toMatch(/unknown_evidence/);
    expect(verdict.textContent).toMatch(/topology is not proven/);
  });
});

describe("EvidenceReview actions", () => {
  beforeEach(() => {
    mocked.evidenceReview.mockResolvedValue(reviewPage);
    mocked.evidenceReviewDetail.mockResolvedValue(reviewDetail);
  });

  async function openFirstRow() {
    const table = await screen.findByRole("table", { name: "Revisions with unknown audience evidence" });
    await userEvent.click(within(table).getAllByRole("row")[1]);
    return screen.findByTestId("review-source-src-q3");
  }

  it("marks the proven audience with a note, reports who reviewed, and opens the lineage", async () => {
    mocked.reviewSourceEvidence.mockResolvedValue({
      source_id: "src-q3",
      revision_id: "rev-q3",
      entry_id: "entry-q3",
      evidence_known: true,
      reviewed_by: "ops_alice",
    });
    const onOpenEntry = vi.fn();
    renderWithQuery(<EvidenceReview session={operator} onOpenEntry={onOpenEntry} />);
    const form = await openFirstRow();
    expect(mocked.evidenceReviewDetail).toHaveBeenCalledWith("rev-q3");
    expect(form.textContent).toMatch(/Victor \(id U123\).*sender/);
    const submit = within(form).getByRole("button", { name: "Record review" }) as HTMLButtonElement;
    await userEvent.type(within(form).getByTestId("review-note"), "Victor confirmed the thread was 1:1");
    expect(submit.disabled).toBe(true); // no actor chosen yet
    await userEvent.click(within(form).getByTestId("audience-a3"));
    await userEvent.click(submit);
    await waitFor(() =>
      expect(mocked.reviewSourceEvidence).toHaveBeenCalledWith(
        "src-q3",
        { kind: "proven", audience: ["a3"] },
        "Victor confirmed the thread was 1:1",
      ),
    );
    expect((await screen.findByTestId("review-result")).textContent).toMatch(/proven audience, reviewed by ops_alice/);
    await userEvent.click(screen.getByTestId("open-reviewed-lineage"));
    expect(onOpenEntry).toHaveBeenCalledWith("entry-q3", "lineage");
  });

  it("leaves a source unknown with only a note", async () => {
    mocked.reviewSourceEvidence.mockResolvedValue({
      source_id: "src-q3",
      revision_id: "rev-q3",
      entry_id: "entry-q3",
      evidence_known: false,
      reviewed_by: "ops_alice",
    });
    renderWithQuery(<EvidenceReview session={operator} onOpenEntry={() => {}} />);
    const form = await openFirstRow();
    await userEvent.click(within(form).getByTestId("review-outcome-unknown"));
    expect(within(form).queryByTestId("audience-a3")).toBeNull();
    await userEvent.type(within(form).getByTestId("review-note"), "could not reach Victor");
    await userEvent.click(within(form).getByRole("button", { name: "Record review" }));
    await waitFor(() =>
      expect(mocked.reviewSourceEvidence).toHaveBeenCalledWith("src-q3", { kind: "leave_unknown" }, "could not reach Victor"),
    );
    expect((await screen.findByTestId("review-result")).textContent).toMatch(/stays unknown/);
  });

  it("shows the last note that left a source unknown", async () => {
    const kept = { ...reviewDetail.sources[0], kept_unknown_by: "ops_bob", kept_unknown_at: "2026-12-03T10:00:00Z", kept_unknown_note: "no reply yet" };
    mocked.evidenceReviewDetail.mockResolvedValue({ ...reviewDetail, sources: [kept] });
    renderWithQuery(<EvidenceReview session={operator} onOpenEntry={() => {}} />);
    const form = await openFirstRow();
    expect(within(form).getByTestId("kept-unknown").textContent).toMatch(/left unknown by ops_bob.*no reply yet/);
  });

  it("shows a refused review (another operator was first) and writes nothing", async () => {
    mocked.reviewSourceEvidence.mockRejectedValue({
      kind: "conflict",
      message: "source src-q3 does not exist or already has known evidence (perhaps another operator reviewed it); nothing was written",
    });
    renderWithQuery(<EvidenceReview session={operator} onOpenEntry={() => {}} />);
    const form = await openFirstRow();
    await userEvent.click(within(form).getByTestId("audience-a4"));
    await userEvent.type(within(form).getByTestId("review-note"), "Priya was the only reader");
    await userEvent.click(within(form).getByRole("button", { name: "Record review" }));
    expect((await within(form).findByTestId("review-error")).textContent).toMatch(/another operator reviewed it/);
    expect(screen.queryByTestId("review-result")).toBeNull();
  });

  it("disables the action for a read-only reviewer and says why", async () => {
    renderWithQuery(<EvidenceReview session={reader} onOpenEntry={() => {}} />);
    const form = await openFirstRow();
    expect(within(form).getByTestId("review-limitation").textContent).toMatch(/not a member of mesh_operator/);
    expect((within(form).getByRole("button", { name: "Record review" }) as HTMLButtonElement).disabled).toBe(true);
    expect((within(form).getByTestId("review-note") as HTMLTextAreaElement).disabled).toBe(true);
    expect((within(form).getByTestId("audience-a3") as HTMLInputElement).disabled).toBe(true);
    expect(mocked.reviewSourceEvidence).not.toHaveBeenCalled();
  });

  it("builds the decision, or says what is missing", () => {
    expect(reviewDecision("leave_unknown", ["a1"])).toEqual({ kind: "leave_unknown" });
    expect(reviewDecision("proven", ["a1", "a2"])).toEqual({ kind: "proven", audience: ["a1", "a2"] });
    expect(reviewDecision("proven", [])).toMatch(/at least one actor/);
  });
});

describe("ScoreChart", () => {
  const selection = (id: string, lexical: number, recency: number, alwaysOn: number) => ({
    ...eventDetail.selections[0],
    entry_id: id,
    revision_id: `rev-${id}`,
    score: lexical + recency + alwaysOn,
    components: {
      ...eventDetail.selections[0].components,
      lexical: { rank: 1, rrf: lexical },
      conversation_boost: 0,
      recency,
      always_on: alwaysOn,
    },
  });
  const alwaysOnFirst = [selection("always", 0, 0.01, 1), selection("ranked", 0.0164, 0.0136, 0)];

  it("scales bars without always-on, so a 1.0 always-on entry leaves other bars comparable", () => {
    const [always, ranked] = chartRows(alwaysOnFirst);
    expect(always.alwaysOn).toBe(1);
    expect(always.segments.map((s) => s.key)).toEqual(["recency"]);
    // The ranked entry's bar fills the scale; its components keep their proportions.
    const full = ranked.segments.reduce((sum, s) => sum + s.fraction, 0);
    expect(full).toBeCloseTo(1);
    expect(ranked.segments.map((s) => s.fraction)).toEqual([0.0164 / 0.03, 0.0136 / 0.03]);
    expect(always.segments[0].fraction).toBeCloseTo(0.01 / 0.03);
  });

  it("draws always-on as a tag apart from the bars", () => {
    renderWithQuery(<ScoreChart selections={alwaysOnFirst} />);
    const chart = screen.getByTestId("score-chart");
    const tags = within(chart).getAllByTestId("always-on-tag");
    expect(tags).toHaveLength(1);
    expect(tags[0].textContent).toMatch(/Always-on: 1\.0000/);
    const lexical = within(chart).getByText("Lexical (RRF): 0.0164", { selector: "title" }).parentElement!;
    expect(Number(lexical.getAttribute("width"))).toBeGreaterThan(100);
  });

  it("labels each bar with the entry's short id, as every other view does", () => {
    const rows = [
      selection("01900000-0000-7000-8000-00000000aaaa", 0.0164, 0.001, 0),
      selection("01900000-0000-7000-8000-00000000bbbb", 0.0100, 0.001, 0),
    ];
    renderWithQuery(<ScoreChart selections={rows} />);
    const labels = [...screen.getByTestId("score-chart").querySelectorAll("text.chart-label")].map((l) => l.textContent);
    expect(labels).toEqual(["#1 rev 2 · …00000000aaaa", "#2 rev 2 · …00000000bbbb"]);
  });

  it("draws the period boost as its own segment", () => {
    const boosted = { ...selection("may", 0.0164, 0.001, 0) };
    boosted.components = { ...boosted.components, period_boost: 0.0049, period: "May 2023" };
    const [row] = chartRows([boosted]);
    expect(row.segments.map((s) => s.key)).toEqual(["lexical", "recency", "period_boost"]);
  });

  it("draws nothing but labels when no component contributes", () => {
    const rows = chartRows([selection("none", 0, 0, 0)]);
    expect(rows[0].segments).toEqual([]);
    expect(rows[0].alwaysOn).toBe(0);
  });
});
