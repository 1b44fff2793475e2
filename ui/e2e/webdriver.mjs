// A minimal W3C WebDriver client for the real-window suites: tauri-driver (which starts
// WebKitWebDriver, which starts the app) on a random local port, one session, and the few
// element commands the suites use. Screenshots are of the whole Xvfb screen (`import -window
// root`), so they show the window as a person sees it.
import { spawn, execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const ELEMENT = "element-6066-11e4-a52e-4f735466cecf";

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls `probe` every 250 ms until it returns something truthy (returned), or fails after `timeoutMs`. */
export async function waitFor(what, probe, timeoutMs = 20000) {
  const deadline = Date.now() + timeoutMs;
  let lastError;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value) return value;
    } catch (err) {
      lastError = err;
    }
    await sleep(250);
  }
  throw new Error(`timed out waiting for ${what}${lastError ? `: ${lastError.message}` : ""}`);
}

/** Saves the Xvfb screen as `<dir>/<name>.png`. */
export function screenshot(dir, name) {
  mkdirSync(dir, { recursive: true });
  execFileSync("import", ["-window", "root", join(dir, `${name}.png`)]);
}

/**
 * Starts tauri-driver (`driverBin`) and waits until it answers. Random ports unless
 * WEBDRIVER_PORT is set, so concurrent runs on one machine do not collide.
 */
export async function startDriver(driverBin) {
  const port = Number(process.env.WEBDRIVER_PORT ?? 20000 + Math.floor(Math.random() * 20000));
  const base = `http://127.0.0.1:${port}`;
  const child = spawn(driverBin, ["--port", String(port), "--native-port", String(port + 1)], {
    stdio: ["ignore", "inherit", "inherit"],
  });
  await waitFor("tauri-driver", async () => (await fetch(`${base}/status`, { signal: AbortSignal.timeout(5000) })).ok, 30000);
  return new Driver(base, child);
}

/** One tauri-driver and at most one session on it. */
export class Driver {
  constructor(base, child) {
    this.base = base;
    this.child = child;
    this.session = null;
  }

  async request(method, path, body) {
    const response = await fetch(`${this.base}${path}`, {
      method,
      headers: { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(60000),
    });
    const json = await response.json().catch(() => ({}));
    if (!response.ok) {
      throw new Error(`${method} ${path} -> ${response.status}: ${JSON.stringify(json.value ?? json).slice(0, 400)}`);
    }
    return json.value;
  }

  /** Creates the session, which launches the app binary `application`. */
  async launch(application) {
    const created = await this.request("POST", "/session", {
      capabilities: { alwaysMatch: { "tauri:options": { application } } },
    });
    this.session = created.sessionId;
  }

  /** Ends the session (the app exits) and stops tauri-driver. */
  async quit() {
    if (this.session) await this.request("DELETE", `/session/${this.session}`).catch(() => {});
    this.session = null;
    this.child.kill("SIGTERM");
  }

  async elements(css) {
    return this.request("POST", `/session/${this.session}/elements`, { using: "css selector", value: css });
  }

  /** The first element matching `css`, waited for. */
  async find(css, timeoutMs) {
    return waitFor(css, async () => {
      const found = await this.elements(css);
      return found.length ? found[0][ELEMENT] : null;
    }, timeoutMs);
  }

  async count(css) {
    return (await this.elements(css)).length;
  }

  async click(css) {
    return this.request("POST", `/session/${this.session}/element/${await this.find(css)}/click`, {});
  }

  async clear(css) {
    return this.request("POST", `/session/${this.session}/element/${await this.find(css)}/clear`, {});
  }

  async type(css, text) {
    return this.request("POST", `/session/${this.session}/element/${await this.find(css)}/value`, { text });
  }

  /** Clears a field, then types `text` into it. */
  async fill(css, text) {
    await this.clear(css);
    await this.type(css, String(text));
  }

  async text(css, timeoutMs) {
    return this.request("GET", `/session/${this.session}/element/${await this.find(css, timeoutMs)}/text`);
  }

  async script(source, args = []) {
    return this.request("POST", `/session/${this.session}/execute/sync`, { script: source, args });
  }

  /** Chooses an option of a React-controlled <select> the way a user's choice would. */
  async choose(css, value) {
    await this.find(css);
    await this.script(
      `const el = document.querySelector(arguments[0]);
       const setter = Object.getOwnPropertyDescriptor(HTMLSelectElement.prototype, "value").set;
       setter.call(el, arguments[1]);
       el.dispatchEvent(new Event("change", { bubbles: true }));`,
      [css, value],
    );
  }
}
