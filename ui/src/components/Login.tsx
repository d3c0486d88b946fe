/** Sign in: the API key is checked against the gateway, then kept in this tab only. */
import { useState } from "preact/hooks";
import { api, storeKey } from "../api.ts";
import { errorText } from "../hooks.ts";

export function Login({ onKey }: { onKey(key: string): void }) {
  const [key, setKey] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    const value = key.trim();
    if (value === "") return;
    setBusy(true);
    setError(null);
    try {
      await api("GET", "/v1/sessions?limit=1", undefined, value);
      storeKey(value);
      onKey(value);
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="login">
      <form onSubmit={submit} aria-labelledby="login-title">
        <h1 id="login-title">Trellis operator</h1>
        <p class="muted">
          Paste an API key (the admin key of <code>npm start</code> is in{" "}
          <code>.trellis/data/admin-api-key</code>). It is kept in this tab only.
        </p>
        <label for="login-key">API key</label>
        <input
          id="login-key"
          type="password"
          data-testid="login-key"
          autocomplete="off"
          value={key}
          onInput={(e) => setKey((e.target as HTMLInputElement).value)}
        />
        <button
          type="submit"
          class="primary"
          data-testid="login-submit"
          disabled={busy || key.trim() === ""}
        >
          {busy ? "Signing in…" : "Sign in"}
        </button>
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
      </form>
    </main>
  );
}
