/**
 * The operator UI's frame: a header, the session drawer (a collapsible
 * column on wide screens, a drawer over the page under 900 px), and the
 * chosen session. Sign-in comes first; the key lives in this tab only.
 */
import { useEffect, useState } from "preact/hooks";
import { forgetKey, storedKey } from "./api.ts";
import { Login } from "./components/Login.tsx";
import { SessionDrawer } from "./components/SessionDrawer.tsx";
import { SessionView } from "./components/SessionView.tsx";
import { useAgents, useMedia, useSessionRoute } from "./hooks.ts";

export function App() {
  const [key, setKey] = useState<string | null>(storedKey);
  const [sessionId, go] = useSessionRoute();
  const [debug, setDebug] = useState(() => sessionStorage.getItem("trellis.debug") === "1");
  const [refreshKey, setRefreshKey] = useState(0);
  const narrow = useMedia("(max-width: 899px)");
  const [drawerOpen, setDrawerOpen] = useState(!narrow);
  const { agents, names, error: agentsError } = useAgents(refreshKey + (key ? 1 : 0));
  useEffect(() => setDrawerOpen(!narrow), [narrow]);

  // On a phone, Escape closes the drawer.
  useEffect(() => {
    if (!narrow || !drawerOpen) return undefined;
    const onKey = (e: KeyboardEvent) => {
      if (e.key === "Escape") setDrawerOpen(false);
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [narrow, drawerOpen]);

  if (!key) return <Login onKey={setKey} />;

  const toggleDebug = () => {
    setDebug((d) => {
      sessionStorage.setItem("trellis.debug", d ? "0" : "1");
      return !d;
    });
  };
  const signOut = () => {
    forgetKey();
    setKey(null);
  };
  return (
    <div class={`app${drawerOpen ? " drawer-open" : ""}${narrow ? " narrow" : ""}`}>
      <header class="top">
        <button
          type="button"
          class="icon-button"
          aria-label="Sessions"
          aria-expanded={drawerOpen}
          aria-controls="session-drawer"
          onClick={() => setDrawerOpen((o) => !o)}
        >
          <span class="burger" aria-hidden="true" />
        </button>
        <h1 class="brand">Trellis</h1>
        <div class="top-actions">
          <label class="toggle">
            <input
              type="checkbox"
              data-testid="debug-toggle"
              checked={debug}
              onChange={toggleDebug}
            />
            Debug
          </label>
          <button type="button" class="ghost small" onClick={signOut}>
            Sign out
          </button>
        </div>
      </header>
      <div class="layout">
        {narrow && drawerOpen ? (
          <button
            type="button"
            class="scrim"
            aria-label="Close sessions"
            tabIndex={-1}
            onClick={() => setDrawerOpen(false)}
          />
        ) : null}
        <div id="session-drawer" class="drawer" hidden={!drawerOpen}>
          <SessionDrawer
            current={sessionId}
            go={go}
            refreshKey={refreshKey}
            agents={agents}
            agentNames={names}
            agentsError={agentsError}
            onPicked={() => {
              if (narrow) setDrawerOpen(false);
            }}
          />
        </div>
        <main class="content">
          {sessionId ? (
            <SessionView
              key={sessionId}
              sessionId={sessionId}
              debug={debug}
              agentNames={names}
              go={go}
              onChanged={() => setRefreshKey((k) => k + 1)}
            />
          ) : (
            <div class="welcome">
              <h2>Pick a session</h2>
              <p class="muted">Or choose an agent in the session list and start a new one.</p>
              {narrow && !drawerOpen ? (
                <button type="button" class="primary" onClick={() => setDrawerOpen(true)}>
                  Open the session list
                </button>
              ) : null}
            </div>
          )}
        </main>
      </div>
    </div>
  );
}
