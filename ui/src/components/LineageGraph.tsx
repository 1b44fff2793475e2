import { useMemo } from "react";
import { Background, Controls, Position, ReactFlow, type Edge, type Node } from "@xyflow/react";
import type { EntryDetail, ErasureNote, RevisionView as Revision, SourceView as Source } from "../api";
import { erasureNote, toldOn } from "../api";

function evidenceText(source: Source): string {
  return source.evidence.state === "known"
    ? `audience: ${source.evidence.labels.join(", ") || "(nobody)"}`
    : "audience UNKNOWN";
}

/**
 * The lineage of one revision as a graph: every source (messages, parent revisions, retrieved
 * memories) on the left, the revision on the right, each edge labelled with that source's
 * audience evidence. Unknown evidence is drawn in the warning colour.
 */
export function LineageGraph({ detail, revision }: { detail: EntryDetail; revision: Revision }) {
  const { nodes, edges } = useMemo(() => {
    const messages = new Map(detail.messages.map((m) => [m.id, m]));
    const linked = new Map(detail.linked_revisions.map((r) => [r.id, r]));
    const sources = distinctSources(revision.sources);
    const nodes: Node[] = [];
    const edges: Edge[] = [];
    const gap = 92;
    const perColumn = 7;
    const columns = Math.ceil(sources.length / perColumn);
    const rows = Math.min(sources.length, perColumn);
    nodes.push({
      id: `rev-${revision.id}`,
      position: { x: columns * 330 + 120, y: Math.max(0, ((rows - 1) * gap) / 2) },
      data: {
        label: `Revision ${revision.revision_number} (${revision.operation})\n${revision.body.slice(0, 90)}${
          revision.erased ? `\n${erasureNote(revision.erased)}` : ""
        }`,
      },
      className: `flow-node revision${revision.erased ? " erased" : ""}`,
      targetPosition: Position.Left,
    });
    sources.forEach((source, index) => {
      const unknown = source.evidence.state !== "known";
      let label: string;
      let erased: ErasureNote | null = null;
      if (source.message_id) {
        const m = messages.get(source.message_id);
        erased = m?.erased ?? null;
        label = m
          ? `${source.kind === "message" ? "Message" : "History message"} · ${m.conversation_title}\n${m.sender_name}${
              m.authenticated ? " ✓" : ""
            }: “${m.excerpt.slice(0, 60)}”`
          : `Message ${source.message_id.slice(0, 8)}`;
      } else {
        const r = source.parent_revision_id ? linked.get(source.parent_revision_id) : undefined;
        const what = source.kind === "parent_revision" ? "Parent revision" : "Retrieved memory";
        erased = r?.erased ?? null;
        label = r
          ? `${what} · rev ${r.revision_number} · learned ${toldOn(r.learned_at)}\n${r.body_preview.slice(0, 60)}`
          : what;
      }
      nodes.push({
        id: `src-${source.id}`,
        position: { x: Math.floor(index / perColumn) * 330, y: (index % perColumn) * gap },
        data: { label: `${label}\n${evidenceText(source)}${erased ? `\n${erasureNote(erased)}` : ""}` },
        className: `flow-node ${unknown ? "unknown" : "known"}${erased ? " erased" : ""}`,
        sourcePosition: Position.Right,
        targetPosition: Position.Left,
      });
      edges.push({
        id: `edge-${source.id}`,
        source: `src-${source.id}`,
        target: `rev-${revision.id}`,
        label: source.evidence.state === "known" ? `known · ${source.evidence.labels.length}` : "unknown",
        className: unknown ? "edge-unknown" : "edge-known",
        animated: unknown,
      });
    });
    return { nodes, edges };
  }, [detail, revision]);

  return (
    <div className="graph" data-testid="lineage-graph" aria-label={`Lineage graph of revision ${revision.revision_number}`}>
      <ReactFlow
        nodes={nodes}
        edges={edges}
        fitView
        fitViewOptions={{ padding: 0.08 }}
        nodesDraggable={false}
        nodesConnectable={false}
        proOptions={{ hideAttribution: true }}
      >
        <Background />
        <Controls showInteractive={false} />
      </ReactFlow>
    </div>
  );
}

/**
 * An amendment keeps every source of what it amends, so the same message can appear more than
 * once in a lineage; the graph draws each distinct source (kind + target + evidence) once.
 */
export function distinctSources(sources: Source[]): Source[] {
  const seen = new Set<string>();
  return sources.filter((s) => {
    const key = `${s.kind}|${s.message_id ?? s.parent_revision_id}|${s.evidence.state}|${s.evidence.state === "known" ? s.evidence.actors.join(",") : ""}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** Who erased the message or revision a source names, if it was erased. */
export function sourceErasure(detail: EntryDetail, source: Source): ErasureNote | null {
  if (source.message_id) return detail.messages.find((m) => m.id === source.message_id)?.erased ?? null;
  if (source.parent_revision_id) {
    return detail.linked_revisions.find((r) => r.id === source.parent_revision_id)?.erased ?? null;
  }
  return null;
}

/** The same lineage as a list, for reading and for assistive technology. */
export function LineageList({ detail, revision }: { detail: EntryDetail; revision: Revision }) {
  return (
    <ul className="lineage-list" aria-label="Lineage sources">
      {distinctSources(revision.sources).map((s) => {
        const erased = sourceErasure(detail, s);
        const state = s.evidence.state === "known" ? "known" : "unknown";
        return (
          <li key={s.id} className={erased ? `${state} erased` : state}>
            <strong>{s.kind.replace("_", " ")}</strong> — {evidenceText(s)} <span className="muted">({s.evidence_basis})</span>
            {erased && (
              <>
                {" "}
                <span className="badge muted">erased</span>{" "}
                <span className="erased-note" data-testid="source-erased-note">
                  {erasureNote(erased)}
                </span>
              </>
            )}
          </li>
        );
      })}
    </ul>
  );
}
