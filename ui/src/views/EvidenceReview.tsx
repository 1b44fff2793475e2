import { useInfiniteQuery } from "@tanstack/react-query";
import type { ColumnDef } from "@tanstack/react-table";
import { commands, shortId, when, type EvidenceReviewItem } from "../api";
import { DataTable } from "../components/DataTable";
import { Empty, ErrorNote, Loading } from "../components/Status";

const columns: ColumnDef<EvidenceReviewItem, unknown>[] = [
  { header: "Entry", accessorKey: "entry_id", cell: (c) => <code>{shortId(c.getValue() as string)}</code> },
  { header: "Memory", accessorKey: "body_preview", cell: (c) => <span className="body">{c.getValue() as string}</span> },
  { header: "Agent", accessorKey: "agent_name" },
  { header: "Rev", accessorKey: "revision_number" },
  { header: "Unknown sources", accessorKey: "unknown_sources" },
  { header: "Kinds", accessorKey: "unknown_source_kinds", cell: (c) => (c.getValue() as string[]).join(", ") },
  { header: "Why unknown", accessorKey: "evidence_bases", cell: (c) => (c.getValue() as string[]).join("; ") },
  { header: "Written", accessorKey: "created_at", cell: (c) => when(c.getValue() as string) },
];

/** Current revisions withheld from retrieval because a source's audience is not proven. */
export function EvidenceReview({ onOpenEntry }: { onOpenEntry: (id: string) => void }) {
  const pages = useInfiniteQuery({
    queryKey: ["review"],
    queryFn: ({ pageParam }) => commands.evidenceReview(pageParam),
    initialPageParam: null as string | null,
    getNextPageParam: (last) => last.next_after,
  });
  const rows = pages.data?.pages.flatMap((p) => p.items) ?? [];
  return (
    <section aria-labelledby="review-title">
      <h2 id="review-title">Evidence review</h2>
      <p className="muted">
        These memories are withheld from every conversation until their audience is established or a sharing grant
        releases them. Open one to inspect its lineage.
      </p>
      {pages.isPending && <Loading what="evidence review" />}
      {pages.isError && <ErrorNote error={pages.error} onRetry={() => pages.refetch()} />}
      {pages.isSuccess && rows.length === 0 && <Empty>No memory is waiting for evidence review.</Empty>}
      {rows.length > 0 && (
        <DataTable
          label="Revisions with unknown audience evidence"
          testId="review-table"
          data={rows}
          columns={columns}
          rowId={(r) => r.revision_id}
          onOpen={(r) => onOpenEntry(r.entry_id)}
        />
      )}
      {pages.hasNextPage && (
        <button type="button" onClick={() => pages.fetchNextPage()}>
          Load more
        </button>
      )}
    </section>
  );
}
