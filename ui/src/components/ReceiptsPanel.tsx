/** Receipts: a count, "Verify all", and the receipts with their verification as details. */
import { useState } from "preact/hooks";
import { api } from "../api.ts";
import type { ReceiptEntry } from "../contract.ts";
import { errorText, type Json } from "../hooks.ts";

type Result = Json | string;

function verdict(result: Result): { good: boolean; text: string } {
  if (typeof result === "string") return { good: false, text: result };
  return result.valid
    ? { good: true, text: "valid" }
    : { good: false, text: `invalid: ${String(result.reason ?? "")}` };
}

export function ReceiptsPanel({ receipts, debug }: { receipts: ReceiptEntry[]; debug: boolean }) {
  const [results, setResults] = useState<Record<string, Result>>({});
  const [busy, setBusy] = useState(false);
  const verify = async (id: string) => {
    try {
      const result = await api("POST", `/v1/receipts/${encodeURIComponent(id)}/verify`, {});
      setResults((r) => ({ ...r, [id]: result }));
    } catch (e) {
      setResults((r) => ({ ...r, [id]: errorText(e) }));
    }
  };
  const verifyAll = async () => {
    setBusy(true);
    for (const r of receipts) await verify(r.receiptId);
    setBusy(false);
  };
  const checked = receipts.filter((r) => results[r.receiptId] !== undefined);
  const valid = checked.filter((r) => verdict(results[r.receiptId]!).good).length;
  return (
    <section class="panel receipts" aria-label="Receipts">
      <p class="receipts-line">
        <span data-testid="receipt-count">
          {receipts.length === 0
            ? "No receipts yet."
            : `${receipts.length} receipt${receipts.length === 1 ? "" : "s"}`}
        </span>
        {checked.length > 0 ? (
          <span class={valid === checked.length ? "good" : "bad"}>
            {" "}
            · {valid} of {checked.length} verified valid
          </span>
        ) : null}
      </p>
      {receipts.length > 0 && (
        <>
          <button type="button" class="secondary small" onClick={verifyAll} disabled={busy}>
            {busy ? "Verifying…" : "Verify all"}
          </button>
          <details class="receipt-details">
            <summary>Details</summary>
            <ul class="receipt-list">
              {receipts.map((r, i) => {
                const result = results[r.receiptId];
                const v = result === undefined ? null : verdict(result);
                return (
                  <li key={r.receiptId} data-testid="receipt-row" data-receipt-id={r.receiptId}>
                    <span>
                      Receipt {i + 1} · {(r.finalState ?? "?").toLowerCase()} · chain #
                      {r.chainIndex ?? "?"}
                    </span>
                    {debug ? <span class="debug-id mono"> {r.receiptId}</span> : null}{" "}
                    <button
                      type="button"
                      class="ghost small"
                      data-testid="verify"
                      aria-label={`Verify receipt ${i + 1}`}
                      onClick={() => verify(r.receiptId)}
                    >
                      Verify
                    </button>
                    {v && (
                      <span data-testid="verification" class={v.good ? "good" : "bad"}>
                        {v.text}
                      </span>
                    )}
                  </li>
                );
              })}
            </ul>
          </details>
        </>
      )}
    </section>
  );
}
