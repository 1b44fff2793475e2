import { beforeEach, describe, expect, it, vi } from "vitest";
import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { commands } from "../bindings";
import { liveToken, renderWithQuery, revokedToken } from "../test/fixtures";
import { AccessTokens, revokeBlocked } from "./AccessTokens";

// The IPC layer only is replaced; the real commands are covered by the end-to-end suite.
vi.mock("../bindings", () => ({
  commands: {
    accessTokens: vi.fn(),
    revokeAccessToken: vi.fn(),
  },
}));

const mocked = vi.mocked(commands);
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
  limitation: "role console_reader is not a member of mesh_operator, so it can browse but not revoke access tokens",
};

beforeEach(() => {
  vi.resetAllMocks();
  mocked.accessTokens.mockResolvedValue([liveToken, revokedToken]);
});

async function rows() {
  const table = await screen.findByRole("table", { name: "Access tokens" });
  return within(table).getAllByRole("row").slice(1);
}

async function openLiveToken() {
  await userEvent.click((await rows())[0]);
  return screen.findByTestId(`token-panel-${liveToken.id}`);
}

describe("AccessTokens", () => {
  it("shows a token past its expiry as expired, and a live one's expiry in its panel", async () => {
    const expiredToken = { ...liveToken, id: "01900000-0000-7000-8000-0000000000t3", expires_at: "2026-01-01T00:00:00Z" };
    const expiring = { ...liveToken, expires_at: "2999-01-01T00:00:00Z" };
    mocked.accessTokens.mockResolvedValue([expiring, expiredToken]);
    renderWithQuery(<AccessTokens session={operator} />);
    const [live, expired] = await rows();
    expect(within(expired).getByTestId("token-state").textContent).toMatch(/expired/);
    expect(within(live).getByTestId("token-state").textContent).toMatch(/live/);
    const panel = await openLiveToken();
    expect(panel.textContent).toMatch(/Expires/);
    expect(panel.textContent).not.toMatch(/never \(until revoked\)/);
  });

  it("lists agent, conversation, speaker, label, created, last used and revocation", async () => {
    renderWithQuery(<AccessTokens session={operator} />);
    expect(screen.getByRole("status").textContent).toMatch(/Loading access tokens/);
    const [live, revoked] = await rows();
    expect(mocked.accessTokens).toHaveBeenCalledWith(null);
    expect(live.textContent).toMatch(/Priya's laptop \(Claude Desktop\)/);
    expect(live.textContent).toMatch(/mesh-assistant/);
    expect(live.textContent).toMatch(/#engineering.*C-ENG/);
    expect(live.textContent).toMatch(/Priya \(id U456\)/);
    expect(live.textContent).toMatch(/never/);
    expect(within(live).getByTestId("token-state").textContent).toMatch(/live/);
    // No title: the channel id stands in; no label: says so.
    expect(revoked.textContent).toMatch(/D-VICTOR/);
    expect(revoked.textContent).toMatch(/none/);
    expect(revoked.textContent).toMatch(/Victor \(id U123\)/);
    expect(within(revoked).getByTestId("token-state").textContent).toMatch(/revoked/);
    expect(screen.queryByTestId("tokens-limitation")).toBeNull();
  });

  it("says so when no token was issued, and shows errors with a retry", async () => {
    mocked.accessTokens.mockRejectedValueOnce({ kind: "database", message: "database error: connection refused" });
    mocked.accessTokens.mockResolvedValueOnce([]);
    renderWithQuery(<AccessTokens session={operator} />);
    expect((await screen.findByRole("alert")).textContent).toMatch(/connection refused/);
    await userEvent.click(screen.getByRole("button", { name: "Retry" }));
    expect(await screen.findByText("No access token has been issued.")).toBeTruthy();
  });

  it("revokes a token with a required reason, reports who revoked, and shows it revoked", async () => {
    mocked.revokeAccessToken.mockResolvedValue({ token_id: liveToken.id, revoked_by: "ops_alice" });
    renderWithQuery(<AccessTokens session={operator} />);
    const panel = await openLiveToken();
    expect(panel.textContent).toMatch(/Priya \(id U456\) in #engineering, memory of mesh-assistant/);
    const submit = within(panel).getByRole("button", { name: "Revoke token" }) as HTMLButtonElement;
    expect(submit.disabled).toBe(true); // no reason yet
    await userEvent.type(within(panel).getByTestId("revoke-reason"), "   ");
    expect(submit.disabled).toBe(true); // blank is no reason
    mocked.accessTokens.mockResolvedValue([{ ...liveToken, revoked_at: "2026-12-05T12:00:00Z" }, revokedToken]);
    await userEvent.type(within(panel).getByTestId("revoke-reason"), "laptop lost");
    await userEvent.click(submit);
    await waitFor(() => expect(mocked.revokeAccessToken).toHaveBeenCalledWith(liveToken.id, "laptop lost"));
    expect((await screen.findByTestId("revoke-result")).textContent).toMatch(/revoked by ops_alice; its next request gets 401/);
    await waitFor(async () => expect(within((await rows())[0]).getByTestId("token-state").textContent).toMatch(/revoked/));
    const after = screen.getByTestId(`token-panel-${liveToken.id}`);
    expect(within(after).getByTestId("token-revoked-at").textContent).toMatch(/gets 401/);
    expect(within(after).queryByTestId("revoke-submit")).toBeNull();
  });

  it("says a refused revocation wrote nothing, and refreshes the list", async () => {
    mocked.revokeAccessToken.mockRejectedValue({ kind: "invalid", message: "invalid token: this token was revoked already" });
    renderWithQuery(<AccessTokens session={operator} />);
    const panel = await openLiveToken();
    mocked.accessTokens.mockResolvedValue([{ ...liveToken, revoked_at: "2026-12-05T12:00:00Z" }, revokedToken]);
    await userEvent.type(within(panel).getByTestId("revoke-reason"), "laptop lost");
    await userEvent.click(within(panel).getByRole("button", { name: "Revoke token" }));
    const refused = await screen.findByTestId("revoke-error");
    expect(refused.textContent).toMatch(/was not revoked: invalid token: this token was revoked already\. Nothing was written/);
    expect(screen.queryByTestId("revoke-result")).toBeNull();
    await waitFor(() => expect(mocked.accessTokens).toHaveBeenCalledTimes(2));
    await waitFor(async () => expect(within((await rows())[0]).getByTestId("token-state").textContent).toMatch(/revoked/));
  });

  it("offers no revocation for a token that is revoked already", async () => {
    renderWithQuery(<AccessTokens session={operator} />);
    await userEvent.click((await rows())[1]);
    const panel = await screen.findByTestId(`token-panel-${revokedToken.id}`);
    expect(within(panel).getByTestId("token-revoked-at")).toBeTruthy();
    expect(within(panel).queryByTestId("revoke-reason")).toBeNull();
  });

  it("disables revocation for a read-only reviewer and says why", async () => {
    renderWithQuery(<AccessTokens session={reader} />);
    expect((await screen.findByTestId("tokens-limitation")).textContent).toMatch(/not a member of mesh_operator/);
    const panel = await openLiveToken();
    expect(within(panel).getByTestId("revoke-limitation").textContent).toMatch(/not a member of mesh_operator/);
    expect((within(panel).getByTestId("revoke-reason") as HTMLTextAreaElement).disabled).toBe(true);
    expect((within(panel).getByRole("button", { name: "Revoke token" }) as HTMLButtonElement).disabled).toBe(true);
    expect(mocked.revokeAccessToken).not.toHaveBeenCalled();
  });

  it("gives a reason when a role may not revoke, even without a limitation from the server", () => {
    expect(revokeBlocked(operator)).toBeNull();
    expect(revokeBlocked(reader)).toMatch(/not a member of mesh_operator/);
    expect(revokeBlocked({ ...reader, limitation: null })).toBe("This role may not revoke access tokens.");
  });
});
