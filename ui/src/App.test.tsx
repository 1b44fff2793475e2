import { beforeEach, expect, it, vi } from "vitest";
import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { commands } from "./bindings";
import { renderWithQuery, entryPage, eventPage, pendingRequest } from "./test/fixtures";
import { App } from "./App";

vi.mock("./bindings", () => ({
  commands: {
    consoleStatus: vi.fn(),
    listAgents: vi.fn(),
    listSubjects: vi.fn(),
    browseEntries: vi.fn(),
    retrievalEvents: vi.fn(),
    sharingRequests: vi.fn(),
    decideSharingRequest: vi.fn(),
    evidenceReview: vi.fn(),
    accessTokens: vi.fn(),
    signIn: vi.fn(),
    signOut: vi.fn(),
    savedConnections: vi.fn(),
    forgetConnection: vi.fn(),
    connectDemo: vi.fn(),
    connectServer: vi.fn(),
    disconnect: vi.fn(),
  },
}));
const mocked = vi.mocked(commands);

beforeEach(() => {
  vi.resetAllMocks();
  localStorage.clear();
  mocked.listAgents.mockResolvedValue([]);
  mocked.listSubjects.mockResolvedValue([]);
  mocked.browseEntries.mockResolvedValue(entryPage);
  mocked.retrievalEvents.mockResolvedValue(eventPage);
  mocked.sharingRequests.mockResolvedValue([]);
  mocked.evidenceReview.mockResolvedValue({ items: [], next_after: null });
  mocked.accessTokens.mockResolvedValue([]);
  mocked.savedConnections.mockResolvedValue([]);
});

const signedIn = (session: { role: string; can_approve: boolean; limitation: string | null }) => ({
  connected: true,
  scripted: false,
  schema_notice: null as string | null,
  database_error: null,
  embedded: true,
  database_label: "socket /run / postgres",
  needs_first_operator: false,
  session_ended: null,
  session: { can_browse: true, can_review_evidence: session.can_approve, can_revoke_tokens: session.can_approve, can_erase: false, erase_limitation: null, ...session },
});

it("shows the database error instead of the sign-in form when the database cannot be opened", async () => {
  mocked.consoleStatus.mockResolvedValue({ ...signedIn({ role: "x", can_approve: true, limitation: null }), session: null, database_error: "cannot open the memory database: no PostgreSQL server binaries found" });
  renderWithQuery(<App />);
  expect((await screen.findByRole("alert")).textContent).toMatch(/no PostgreSQL server binaries/);
});

it("switches views with number keys and themes with the toggle", async () => {
  mocked.consoleStatus.mockResolvedValue(signedIn({ role: "ops_alice", can_approve: true, limitation: null }));
  renderWithQuery(<App />);
  expect(await screen.findByRole("table", { name: "Memory entries" })).toBeTruthy();
  expect(screen.getByTestId("session-role").textContent).toMatch(/ops_alice.*operator/);
  fireEvent.keyDown(window, { key: "2" });
  expect(await screen.findByRole("table", { name: "Retrieval events" })).toBeTruthy();
  expect(screen.getByTestId("nav-events").getAttribute("aria-current")).toBe("page");
  const before = document.documentElement.dataset.theme;
  await userEvent.click(screen.getByTestId("theme-toggle"));
  await waitFor(() => expect(document.documentElement.dataset.theme).not.toBe(before));
  expect(localStorage.getItem("mesh-theme")).toBe(document.documentElement.dataset.theme);
});

it("tells a read-only role in the sharing view why it cannot approve", async () => {
  mocked.consoleStatus.mockResolvedValue(
    signedIn({ role: "auditor", can_approve: false, limitation: "role auditor is not a member of mesh_operator" }),
  );
  renderWithQuery(<App />);
  expect(await screen.findByText("read-only")).toBeTruthy();
  fireEvent.keyDown(window, { key: "4" });
  expect((await screen.findByTestId("approve-limitation")).textContent).toMatch(/not a member of mesh_operator/);
});

it("tells a read-only role in the evidence review why it cannot review", async () => {
  mocked.consoleStatus.mockResolvedValue(
    signedIn({ role: "auditor", can_approve: false, limitation: "role auditor is not a member of mesh_operator" }),
  );
  renderWithQuery(<App />);
  expect(await screen.findByText("read-only")).toBeTruthy();
  fireEvent.keyDown(window, { key: "5" });
  expect((await screen.findByTestId("review-role-limitation")).textContent).toMatch(/not a member of mesh_operator/);
});

it("opens the access tokens view from the navigation and with key 6", async () => {
  mocked.consoleStatus.mockResolvedValue(signedIn({ role: "ops_alice", can_approve: true, limitation: null }));
  renderWithQuery(<App />);
  expect(await screen.findByRole("table", { name: "Memory entries" })).toBeTruthy();
  fireEvent.keyDown(window, { key: "6" });
  expect(await screen.findByText("No access token has been issued.")).toBeTruthy();
  expect(screen.getByTestId("nav-tokens").getAttribute("aria-current")).toBe("page");
  await userEvent.click(screen.getByTestId("nav-memory"));
  await userEvent.click(screen.getByTestId("nav-tokens"));
  expect(screen.getByRole("heading", { name: "Access tokens (MCP)" })).toBeTruthy();
  expect(mocked.accessTokens).toHaveBeenCalledWith(null);
});

it("returns to sign-in when the session ends mid-use, keeping what was typed", async () => {
  const alice = signedIn({ role: "ops_alice", can_approve: true, limitation: null });
  mocked.consoleStatus.mockResolvedValue(alice);
  mocked.sharingRequests.mockResolvedValue([pendingRequest]);
  renderWithQuery(<App />);
  expect(await screen.findByRole("table", { name: "Memory entries" })).toBeTruthy();
  fireEvent.keyDown(window, { key: "4" });
  const reason = within(await screen.findByTestId("request-req-1")).getByRole("textbox");
  await userEvent.type(reason, "verified with Alex by phone");

  // The database stops accepting the role: the next command is refused, the status says why.
  const ended = "Your session as ops_alice ended: the database no longer accepts this role.";
  mocked.consoleStatus.mockResolvedValue({ ...alice, session: null, session_ended: ended });
  mocked.decideSharingRequest.mockRejectedValue({ kind: "not_signed_in", message: "sign-in failed" });
  await userEvent.click(screen.getByRole("button", { name: "Deny" }));
  const dialog = await screen.findByRole("dialog", { name: "Session ended" });
  expect(within(dialog).getByTestId("session-ended").textContent).toBe(ended);
  expect((within(dialog).getByLabelText("Role name") as HTMLInputElement).value).toBe("ops_alice");

  // Signing in again closes the dialog over the same views: the reason is still there.
  mocked.signIn.mockResolvedValue(alice.session);
  mocked.consoleStatus.mockResolvedValue(alice);
  await userEvent.type(within(dialog).getByLabelText("Password"), "correct-horse-battery");
  await userEvent.click(within(dialog).getByRole("button", { name: "Sign in" }));
  await waitFor(() => expect(screen.queryByRole("dialog")).toBeNull());
  expect((within(screen.getByTestId("request-req-1")).getByRole("textbox") as HTMLTextAreaElement).value).toBe(
    "verified with Alex by phone",
  );
});

const notConnected = {
  ...signedIn({ role: "x", can_approve: false, limitation: null }),
  connected: false,
  embedded: false,
  database_label: "",
  session: null,
};

it("opens on the connection screen and fills the form from a saved connection", async () => {
  mocked.consoleStatus.mockResolvedValue(notConnected);
  mocked.savedConnections.mockResolvedValue([
    { host: "db.internal", port: 6432, database: "mesh_prod", tls: "verify-full", ca_file: "/etc/ca.pem", role: "ava_audit" },
  ]);
  renderWithQuery(<App />);
  expect(await screen.findByTestId("connection-screen")).toBeTruthy();
  await userEvent.click(await screen.findByText(/ava_audit@db.internal:6432/));
  expect((screen.getByLabelText("Host") as HTMLInputElement).value).toBe("db.internal");
  expect((screen.getByLabelText("Role") as HTMLInputElement).value).toBe("ava_audit");
  expect((screen.getByLabelText("Password") as HTMLInputElement).value).toBe("");
});

it("sends the server form and shows why the connection failed", async () => {
  mocked.consoleStatus.mockResolvedValue(notConnected);
  mocked.connectServer.mockRejectedValue({ kind: "database", message: "certificate not trusted (CA /tmp/wrong.pem)" });
  renderWithQuery(<App />);
  await userEvent.type(await screen.findByLabelText("Host"), "localhost");
  await userEvent.type(screen.getByLabelText("Role"), "ava_audit");
  await userEvent.type(screen.getByLabelText("Password"), "secret-secret");
  await userEvent.click(screen.getByTestId("connect-server"));
  expect((await screen.findByTestId("connection-error")).textContent).toMatch(/certificate not trusted/);
  expect(mocked.connectServer).toHaveBeenCalledWith(
    { host: "localhost", port: 5432, database: "mesh_memory", tls: "verify-full", ca_file: null, role: "ava_audit" },
    "secret-secret",
    true,
  );
});

it("shows the read-only banner when the database's schema is older", async () => {
  mocked.consoleStatus.mockResolvedValue({
    ...signedIn({ role: "ava_audit", can_approve: false, limitation: "older schema" }),
    embedded: false,
    schema_notice: "this database's schema is older than this console: run mesh-memory db migrate",
  });
  renderWithQuery(<App />);
  expect((await screen.findByTestId("schema-banner")).textContent).toMatch(/mesh-memory db migrate/);
  expect(screen.getByTestId("disconnect")).toBeTruthy();
});
