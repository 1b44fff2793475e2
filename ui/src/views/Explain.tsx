import { useState } from "react";
import { useMutation, useQuery } from "@tanstack/react-query";
import { commands } from "../api";
import { ErrorNote, Loading } from "../components/Status";

/** Pick an entry and a conversation: see whether it is eligible there, or which rule rejects it. */
export function ExplainView() {
  const [entryId, setEntryId] = useState("");
  const [conversationId, setConversationId] = useState("");
  const conversations = useQuery({ queryKey: ["conversations"], queryFn: () => commands.listConversations(null) });
  const entries = useQuery({
    queryKey: ["entries", "explain-picker"],
    queryFn: () => commands.browseEntries({ agent: null, subject: null, state: "live", text: null }, null),
  });
  const explain = useMutation({ mutationFn: () => commands.explain(entryId.trim(), conversationId) });

  return (
    <section aria-labelledby="explain-title">
      <h2 id="explain-title">Explain eligibility</h2>
      <form
        className="filters"
        onSubmit={(e) => {
          e.preventDefault();
          explain.mutate();
        }}
      >
        <label>
          Entry
          <select value={entryId} onChange={(e) => setEntryId(e.target.value)} required data-testid="explain-entry">
            <option value="">Choose an entry…</option>
            {entries.data?.entries.map((e) => (
              <option key={e.entry_id} value={e.entry_id}>
                {e.body_preview.slice(0, 60)}
              </option>
            ))}
          </select>
        </label>
        <label>
          Conversation
          <select
            value={conversationId}
            onChange={(e) => setConversationId(e.target.value)}
            required
            data-testid="explain-conversation"
          >
            <option value="">Choose a conversation…</option>
            {conversations.data?.map((c) => (
              <option key={c.id} value={c.id}>
                {c.title} ({c.topology})
              </option>
            ))}
          </select>
        </label>
        <button type="submit" className="primary" disabled={!entryId || !conversationId || explain.isPending}>
          Explain
        </button>
      </form>
      {(entries.isPending || conversations.isPending) && <Loading what="choices" />}
      {entries.isError && <ErrorNote error={entries.error} />}
      {conversations.isError && <ErrorNote error={conversations.error} />}
      {explain.isPending && <Loading what="verdict" />}
      {explain.isError && <ErrorNote error={explain.error} />}
      {explain.data && (
        <article
          className={`card verdict ${explain.data.eligible ? "eligible" : "rejected"}`}
          data-testid="explain-verdict"
          aria-live="polite"
        >
          <h3>{explain.data.eligible ? "Eligible" : "Not eligible"}</h3>
          <p>
            Rule: <code>{explain.data.rule}</code>
          </p>
          <p>{explain.data.explanation}</p>
          <p className="muted">Destination audience: {explain.data.audience.join(", ") || "nobody"}</p>
          {explain.data.failing_source && (
            <p>
              Failing source: {explain.data.failing_source.kind} ({explain.data.failing_source.evidence_basis})
              {explain.data.failing_source.missing_actors.length > 0 &&
                ` — could not be read by ${explain.data.failing_source.missing_actors.join(", ")}`}
            </p>
          )}
        </article>
      )}
    </section>
  );
}
