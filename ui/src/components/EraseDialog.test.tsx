import { beforeEach, describe, expect, it, vi } from "vitest";
import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { commands } from "../bindings";
import type { EntryDetail, ErasureNote, ErasurePreview, OperatorRights } from "../bindings";
import { entryDetail, renderWithQuery } from "../test/fixtures";
import { EntryDetailView } from "../views/EntryDetail";
import { eraseBlocked } from "./EraseDialog";

// The IPC layer only is replaced; the real commands are covered by the end-to-end suite.
vi.mock("../bindings", () => ({
  commands: {
    entryDetail: vi.fn(),
    previewErasure: vi.fn(),
    erase: vi.fn(),
    verifyErasure: vi.fn(),
  },
}));

const mocked = vi.mocked(commands);
const eraser: OperatorRights = {
  role: "ops_alice",
  can_browse: true,
  can_approve: true,
  can_review_evidence: true,
  can_revoke_tokens: true,
  can_erase: true,
  erase_limitation: null,
  limitation: null,
};
const operator: OperatorRights = {
  ...eraser,
  can_erase: false,
  erase_limitation:
    "role ops_alice is not a member of mesh_eraser, so it cannot erase stored text; ask an administrator to GRANT mesh_eraser TO ops_alice",
};

const preview: ErasurePreview = {
  scope: { kind: "person", actor: "a1", agent: "agent" },
  counts: {
    revisions: 2,
    messages: 3,
    source_messages: 1,
    replies: 1,
    turns: 4,
    entries: 1,
    sharing_requests: 1,
    embeddings: 2,
  },
  revisions: [
    { entry: "000000000001", revision_id: "rev-1", excerpt: "Leads the payments team." },
    { entry: "000000000001", revision_id: "rev-2", excerpt: "Leads the platform team." },
  ],
  messages: [
    { message_id: "m-1", kind: "source", excerpt: "Alex told me: leads the payments team." },
    { message_id: "m-2", kind: "reply", excerpt: "Noted: Alex leads the payments team." },
  ],
  object_ids: ["o-1", "o-2", "o-3"],
  confirmation: "0123456789abcdef",
};

const note: ErasureNote = {
  erasure_id: "er-1",
  erased_by: "ops_alice",
  erased_on: "2026-12-06",
  reason: "GDPR request #42",
};

/** The fixture entry after Dana's erasure: bodies are markers, each with its note. */
const erasedDetail: EntryDetail = {
  ...entryDetail,
  state: "forgotten",
  revisions: entryDetail.revisions.map((r) => ({ ...r, body: "[erased]", erased: note })),
  messages: entryDetail.messages.map((m) => ({ ...m, excerpt: "[erased]", erased: note })),
};

beforeEach(() => {
  vi.resetAllMocks();
  mocked.entryDetail.mockResolvedValue(entryDetail);
  mocked.previewErasure.mockResolvedValue(preview);
});

async function openPersonErasure() {
  renderWithQuery(<EntryDetailView entryId={entryDetail.entry_id} session={eraser} onClose={() => {}} />);
  const button = await screen.findByTestId("erase-person");
  expect(button.textContent).toMatch(/Erase everything about or told by Dana Smith \(id U321\)/);
  await userEvent.click(button);
  return screen.findByRole("dialog", { name: "Erase everything about or told by Dana Smith (id U321)" });
}

describe("Erasure", () => {
  it("is disabled for a role that may not erase, and says why", async () => {
    renderWithQuery(<EntryDetailView entryId={entryDetail.entry_id} session={operator} onClose={() => {}} />);
    const entry = (await screen.findByTestId("erase-entry")) as HTMLButtonElement;
    const person = screen.getByTestId("erase-person") as HTMLButtonElement;
    expect(entry.disabled).toBe(true);
    expect(person.disabled).toBe(true);
    expect(entry.title).toMatch(/not a member of mesh_eraser/);
    expect(person.title).toMatch(/GRANT mesh_eraser TO ops_alice/);
    expect(screen.getByTestId("erase-limitation").textContent).toMatch(/Erase is not available: role ops_alice is not a member/);
    await userEvent.click(entry);
    expect(screen.queryByRole("dialog")).toBeNull();
    expect(mocked.previewErasure).not.toHaveBeenCalled();
    expect(eraseBlocked({ ...operator, erase_limitation: null })).toBe("This role may not erase stored text.");
    expect(eraseBlocked(eraser)).toBeNull();
  });

  it("previews the person's erasure in this runtime agent, with counts per kind and the text that goes", async () => {
    const dialog = await openPersonErasure();
    expect(mocked.previewErasure).toHaveBeenCalledWith({ kind: "person", actor: "a1", agent: "agent" });
    await within(dialog).findByTestId("erase-preview");
    const count = (kind: string) => within(dialog).getByTestId(`erase-count-${kind}`).textContent;
    expect(count("revisions")).toMatch(/revisions.*2$/);
    expect(count("messages")).toMatch(/messages sent3$/);
    expect(count("source_messages")).toMatch(/messages learned from1$/);
    expect(count("replies")).toMatch(/replies1$/);
    expect(count("turns")).toMatch(/turn records4$/);
    expect(count("entries")).toMatch(/entries retired1$/);
    expect(count("sharing_requests")).toMatch(/sharing requests1$/);
    expect(count("embeddings")).toMatch(/embeddings2$/);
    const excerpts = within(within(dialog).getByTestId("erase-excerpts")).getAllByRole("listitem");
    expect(excerpts.map((e) => e.textContent)).toEqual([
      "…000000000001 Leads the payments team.",
      "…000000000001 Leads the platform team.",
    ]);
    const messages = within(within(dialog).getByTestId("erase-messages")).getAllByRole("listitem");
    expect(messages.map((m) => m.textContent)).toEqual([
      "learned from: Alex told me: leads the payments team.",
      "reply: Noted: Alex leads the payments team.",
    ]);
  });

  it("confirms only with a reason and the typed word, then erases the previewed objects and says who erased", async () => {
    mocked.erase.mockResolvedValue({
      erasure_id: "er-1",
      erased_by: "ops_alice",
      counts: preview.counts,
      fingerprinted: true,
      vacuumed: ["messages"],
      locked_ms: 12,
      vacuum_ms: 3,
    });
    const dialog = await openPersonErasure();
    await within(dialog).findByTestId("erase-preview");
    const submit = within(dialog).getByTestId("erase-submit") as HTMLButtonElement;
    expect(submit.disabled).toBe(true);
    await userEvent.type(within(dialog).getByTestId("erase-reason"), "GDPR request #42");
    expect(submit.disabled).toBe(true); // no typed confirmation yet
    await userEvent.type(within(dialog).getByTestId("erase-confirm-word"), "eras");
    expect(submit.disabled).toBe(true); // not the word
    await userEvent.type(within(dialog).getByTestId("erase-confirm-word"), "e");
    expect(submit.disabled).toBe(false);
    await userEvent.clear(within(dialog).getByTestId("erase-reason"));
    await userEvent.type(within(dialog).getByTestId("erase-reason"), "   ");
    expect(submit.disabled).toBe(true); // a blank reason is no reason
    await userEvent.clear(within(dialog).getByTestId("erase-reason"));
    await userEvent.type(within(dialog).getByTestId("erase-reason"), "GDPR request #42");
    mocked.entryDetail.mockResolvedValue(erasedDetail);
    await userEvent.click(submit);
    await waitFor(() =>
      expect(mocked.erase).toHaveBeenCalledWith(
        { kind: "person", actor: "a1", agent: "agent" },
        ["o-1", "o-2", "o-3"],
        "GDPR request #42",
      ),
    );
    const result = await screen.findByTestId("erase-result");
    expect(result.textContent).toMatch(/Erasure er-1 done: erased by ops_alice/);
    expect(screen.queryByRole("dialog")).toBeNull();
    // The entry view is read again and shows the erasure.
    await waitFor(() => expect(mocked.entryDetail).toHaveBeenCalledTimes(2));
    await waitFor(() => expect(screen.getAllByTestId("erased-note")).toHaveLength(2));
  });

  it("erases one entry by its scope", async () => {
    mocked.previewErasure.mockResolvedValue({ ...preview, scope: { kind: "entry", entry: entryDetail.entry_id } });
    renderWithQuery(<EntryDetailView entryId={entryDetail.entry_id} session={eraser} onClose={() => {}} />);
    await userEvent.click(await screen.findByTestId("erase-entry"));
    const dialog = await screen.findByRole("dialog", { name: "Erase entry …000000000001" });
    await within(dialog).findByTestId("erase-preview");
    expect(mocked.previewErasure).toHaveBeenCalledWith({ kind: "entry", entry: entryDetail.entry_id });
    await userEvent.click(within(dialog).getByTestId("erase-cancel"));
    expect(screen.queryByRole("dialog")).toBeNull();
    expect(mocked.erase).not.toHaveBeenCalled();
  });

  it("a changed scope says to preview again, reads the preview again, and keeps what was typed", async () => {
    mocked.erase.mockRejectedValueOnce({
      kind: "conflict",
      message: "what this erasure reaches changed since its preview; preview again and confirm what it shows",
    });
    const dialog = await openPersonErasure();
    await within(dialog).findByTestId("erase-preview");
    await userEvent.type(within(dialog).getByTestId("erase-reason"), "GDPR request #42");
    await userEvent.type(within(dialog).getByTestId("erase-confirm-word"), "erase");
    const newer = { ...preview, counts: { ...preview.counts, messages: 4 }, object_ids: ["o-1", "o-2", "o-3", "o-4"] };
    mocked.previewErasure.mockResolvedValue(newer);
    await userEvent.click(within(dialog).getByTestId("erase-submit"));
    const refused = await within(dialog).findByTestId("erase-error");
    expect(refused.textContent).toMatch(/Nothing was erased: what this erasure reaches changed since its preview/);
    expect(refused.textContent).toMatch(/preview above is read again/);
    await waitFor(() => expect(within(dialog).getByTestId("erase-count-messages").textContent).toMatch(/4$/));
    expect((within(dialog).getByTestId("erase-reason") as HTMLTextAreaElement).value).toBe("GDPR request #42");
    expect((within(dialog).getByTestId("erase-confirm-word") as HTMLInputElement).value).toBe("erase");
    mocked.erase.mockResolvedValue({
      erasure_id: "er-2",
      erased_by: "ops_alice",
      counts: newer.counts,
      fingerprinted: false,
      vacuumed: [],
      locked_ms: 9,
      vacuum_ms: 2,
    });
    await userEvent.click(within(dialog).getByTestId("erase-submit"));
    await waitFor(() => expect(mocked.erase).toHaveBeenLastCalledWith(newer.scope, newer.object_ids, "GDPR request #42"));
    expect((await screen.findByTestId("erase-result")).textContent).toMatch(/erased by ops_alice/);
  });

  it("shows other errors and keeps the dialog with what was typed", async () => {
    mocked.erase.mockRejectedValue({ kind: "forbidden", message: "this role may not erase" });
    const dialog = await openPersonErasure();
    await within(dialog).findByTestId("erase-preview");
    await userEvent.type(within(dialog).getByTestId("erase-reason"), "ticket 7");
    await userEvent.type(within(dialog).getByTestId("erase-confirm-word"), "erase");
    await userEvent.click(within(dialog).getByTestId("erase-submit"));
    expect((await within(dialog).findByTestId("erase-error")).textContent).toMatch(/Nothing was erased: this role may not erase/);
    expect(mocked.previewErasure).toHaveBeenCalledTimes(1);
    expect((within(dialog).getByTestId("erase-reason") as HTMLTextAreaElement).value).toBe("ticket 7");
  });

  it("shows an erased revision's note in the history and the lineage", async () => {
    mocked.entryDetail.mockResolvedValue(erasedDetail);
    renderWithQuery(<EntryDetailView entryId={entryDetail.entry_id} session={eraser} onClose={() => {}} />);
    const rev2 = await screen.findByTestId("revision-2");
    expect(within(rev2).getByTestId("body").textContent).toBe("[erased]");
    expect(within(rev2).queryByTestId("body-diff")).toBeNull();
    expect(within(rev2).getByTestId("erased-note").textContent).toBe("erased by ops_alice on 2026-12-06: GDPR request #42");
    expect(rev2.className).toMatch(/erased/);
    await userEvent.click(screen.getByRole("tab", { name: "Lineage" }));
    expect(screen.getByTestId("lineage-erased-note").textContent).toMatch(
      /text of revision 2 was erased by ops_alice on 2026-12-06: GDPR request #42/,
    );
    const items = within(screen.getByRole("list", { name: "Lineage sources" })).getAllByRole("listitem");
    // The message source was erased; the retrieved revision was not.
    expect(within(items[0]).getByTestId("source-erased-note").textContent).toBe(
      "erased by ops_alice on 2026-12-06: GDPR request #42",
    );
    expect(items[0].className).toMatch(/erased/);
    expect(within(items[1]).queryByTestId("source-erased-note")).toBeNull();
  });
});
