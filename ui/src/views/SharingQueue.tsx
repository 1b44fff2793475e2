import { useEffect, useRef, useState } from "react";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import {
  commands,
  errorMessage,
  shortId,
  when,
  type ConsoleError,
  type Decision,
  type OperatorRights,
  type SharingRequestView,
  type SharingState,
} from "../api";

/** A decision the database refused because the queue was out of date; nothing was written. */
export type Refusal = { requestId: string; approve: boolean; message: string };

/**
 * Whether a failed decision means the queue showed an outdated request (decided by someone
 * else, amended, forgotten, expired or gone): then the queue is refreshed and the refusal is
 * shown above it, since the card itself may leave the list.
 */
export function isOutdatedRequest(error: unknown): boolean {
  const kind = error && typeof error === "object" ? (error as ConsoleError).kind : undefined;
  return kind === "conflict" || kind === "not_found";
}
import { Empty, ErrorNote, Loading } from "../components/Status";
import { ReasonField } from "../components/ReasonField";

function RequestCard({
  request,
  session,
  onOpenEntry,
  onDecided,
  onRefused,
}: {
  request: SharingRequestView;
  session: OperatorRights;
  onOpenEntry: (id: string) => void;
  onDecided: (decision: Decision) => void;
  onRefused: (refusal: Refusal) => void;
}) {
  const queryClient = useQueryClient();
  const [reason, setReason] = useState("");
  const decide = useMutation({
    mutationFn: (approve: boolean) => commands.decideSharingRequest(request.id, approve, reason.trim()),
    onSuccess: (decision) => {
      onDecided(decision);
      queryClient.invalidateQueries({ queryKey: ["sharing"] });
    },
    onError: (error, approve) => {
      if (!isOutdatedRequest(error)) return;
      onRefused({ requestId: request.id, approve, message: errorMessage(error) });
      queryClient.invalidateQueries({ queryKey: ["sharing"] });
    },
  });
  const pending = request.state === "pending";
  const blocked = !session.can_approve
    ? (session.limitation ?? "This role may not decide sharing requests.")
    : !request.revision_is_current
      ? "The revision was amended or forgotten since the request; it can no longer be approved."
      : null;
  const reasonId = `reason-${request.id}`;
  return (
    <article className="card request" data-testid={`request-${request.id}`} aria-label={`Sharing request ${shortId(request.id)}`}>
      <header>
        <strong>Request {shortId(request.id)}</strong>{" "}
        <span className={`badge ${pending ? "warn" : request.state === "approved" ? "ok" : "muted"}`}>{request.state}</span>
        {!request.revision_is_current && <span className="badge danger">revision no longer current</span>}
        <span className="muted"> {request.agent_name} · requested {when(request.created_at)}</span>
      </header>
      <dl className="facts">
        <dt>Revision</dt>
        <dd>
          <button type="button" className="link" onClick={() => onOpenEntry(request.entry_id)}>
            entry {shortId(request.entry_id)}, revision {request.revision_number}
          </button>{" "}
          (see its sources and evidence)
        </dd>
        <dt>Memory</dt>
        <dd className="quote">{request.body}</dd>
        <dt>Proposed audience</dt>
        <dd data-testid="proposed-audience">{request.proposed_audience_names.join(", ") || "nobody"}</dd>
        {pending && (
          <>
            <dt>Waiting for</dt>
            <dd data-testid="missing-voices">
              {request.missing_voice_names.length > 0
                ? `${request.missing_voice_names.join(", ")} to confirm in a direct message (or an operator's decision)`
                : "an operator's decision (every voice has confirmed or none is needed)"}
            </dd>
          </>
        )}
        <dt>Requested by</dt>
        <dd>
          {request.requested_by} in {request.requested_in}
          {request.target_conversation ? `, to share in ${request.target_conversation}` : ""}
        </dd>
        <dt>Rationale</dt>
        <dd>{request.rationale}</dd>
        {!pending && (
          <>
            <dt>Decision</dt>
            <dd data-testid="decision">
              {request.state} by <strong>{request.decided_by}</strong> {when(request.decided_at)} — {request.decision_reason}
            </dd>
          </>
        )}
      </dl>
      {pending && (
        <form
          className="decide"
          onSubmit={(e) => {
            e.preventDefault();
          }}
        >
          <ReasonField
            id={reasonId}
            label="Reason (recorded with your role name)"
            value={reason}
            onChange={setReason}
            disabled={!!blocked && !session.can_approve}
            testId="decision-reason"
          />
          {blocked && (
            <p className="notice" role="note">
              {blocked}
            </p>
          )}
          <div className="buttons">
            <button
              type="button"
              className="primary"
              disabled={!!blocked || !reason.trim() || decide.isPending}
              onClick={() => decide.mutate(true)}
              data-testid="approve"
            >
              Approve
            </button>
            <button
              type="button"
              className="danger"
              disabled={!session.can_approve || !reason.trim() || decide.isPending}
              onClick={() => decide.mutate(false)}
              data-testid="deny"
            >
              Deny
            </button>
          </div>
          {decide.isError && !isOutdatedRequest(decide.error) && (
            <p className="error" role="alert">
              {errorMessage(decide.error)}
            </p>
          )}
        </form>
      )}
    </article>
  );
}

/** The sharing-request queue: pending requests to approve or deny, and the decided history. */
export function SharingQueue({ session, onOpenEntry }: { session: OperatorRights; onOpenEntry: (id: string) => void }) {
  const [state, setState] = useState<SharingState | "all">("pending");
  const [lastDecision, setLastDecision] = useState<Decision | null>(null);
  const [refusal, setRefusal] = useState<Refusal | null>(null);
  const outcome = useRef<HTMLDivElement>(null);
  useEffect(() => {
    // The outcome is announced above the queue; the operator clicked in a card further down.
    if (refusal || lastDecision) outcome.current?.scrollIntoView?.({ block: "nearest" });
  }, [refusal, lastDecision]);
  const requests = useQuery({
    queryKey: ["sharing", state],
    queryFn: () => commands.sharingRequests(state === "all" ? null : state),
  });
  return (
    <section aria-labelledby="sharing-title">
      <div className="section-head">
        <h2 id="sharing-title">Sharing requests</h2>
        <label className="inline">
          Show{" "}
          <select value={state} onChange={(e) => setState(e.target.value as SharingState | "all")}>
            <option value="pending">Pending</option>
            <option value="approved">Approved</option>
            <option value="denied">Denied</option>
            <option value="all">All</option>
          </select>
        </label>
      </div>
      <div ref={outcome}>
        {refusal && (
          <p className="notice error" role="alert" data-testid="decision-refused" data-request-id={refusal.requestId}>
            Request {shortId(refusal.requestId)} was not {refusal.approve ? "approved" : "denied"}: {refusal.message}.
            The queue below is refreshed.
          </p>
        )}
        {lastDecision && (
          <p className="notice success" role="status" data-testid="decision-result">
            Request {shortId(lastDecision.request_id)} {lastDecision.state} by <strong>{lastDecision.decided_by}</strong>
            {lastDecision.grant_id ? `; grant ${shortId(lastDecision.grant_id)} created for that revision only` : ""}.
          </p>
        )}
      </div>
      {requests.isPending && <Loading what="sharing requests" />}
      {requests.isError && <ErrorNote error={requests.error} onRetry={() => requests.refetch()} />}
      {requests.isSuccess && requests.data.length === 0 && <Empty>No {state === "all" ? "" : state} requests.</Empty>}
      {requests.data?.map((r) => (
        <RequestCard
          key={r.id}
          request={r}
          session={session}
          onOpenEntry={onOpenEntry}
          onDecided={(decision) => {
            setRefusal(null);
            setLastDecision(decision);
          }}
          onRefused={(refused) => {
            setLastDecision(null);
            setRefusal(refused);
          }}
        />
      ))}
    </section>
  );
}
