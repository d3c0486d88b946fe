// Command echo_worker is a Trellis agent backend in Go over plain gRPC
// (trellis.adapters.v1.WorkerService), built from the generated stubs only —
// the Go twin of clients/python/examples/echo_worker.py.
//
// A truthful backend: it declares what it can do (stream text; no tools,
// attachments, approvals or resume), negotiates every offer itself and
// refuses what it cannot do, streams "echo: <input>" word by word
// (-word-delay apart), stops on a cancel command, and heartbeats its lease;
// when the lease or the stream is lost it connects again.
//
// Flags override the environment: -url (TRELLIS_URL, default
// http://127.0.0.1:8080), -api-key (TRELLIS_API_KEY), -api-key-file
// (TRELLIS_API_KEY_FILE, default .trellis/data/admin-api-key), -backend,
// -worker-id, -capacity, -heartbeat-ms, -word-delay. Each step is printed as
// one JSON line on stdout.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/ioutil"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	adaptersv1 "trellis.dev/clients/go/gen/trellis/adapters/v1"
	corev1 "trellis.dev/clients/go/gen/trellis/core/v1"
)

var capabilities = &adaptersv1.ExecutionCapabilities{
	SchemaVersion:       1,
	ToolUse:             adaptersv1.ToolUseSupport_TOOL_USE_SUPPORT_NONE,
	StructuredToolCalls: false,
	ContinuationSupport: adaptersv1.ContinuationSupport_CONTINUATION_SUPPORT_NONE,
	ApprovalInterrupts:  adaptersv1.ApprovalInterrupts_APPROVAL_INTERRUPTS_NONE,
	TraceDepth:          adaptersv1.TraceDepth_TRACE_DEPTH_MINIMAL,
	Attachments:         false,
	Streaming:           adaptersv1.StreamingSupport_STREAMING_SUPPORT_NATIVE,
	MaxContextStrategy:  adaptersv1.ContextStrategy_CONTEXT_STRATEGY_SMALL,
	Notes:               []string{"echo worker (Go, gRPC): repeats the input, streamed word by word"},
}

var out sync.Mutex

func emit(fields map[string]interface{}) {
	line, _ := json.Marshal(fields)
	out.Lock()
	defer out.Unlock()
	fmt.Println(string(line))
}

func env(name, fallback string) string {
	if value := os.Getenv(name); value != "" {
		return value
	}
	return fallback
}

// negotiate is this worker's own answer to "can you run this honestly?".
func negotiate(request *adaptersv1.ExecutionRequest) *adaptersv1.ExecutionNegotiation {
	var reasons []*adaptersv1.NegotiationReason
	block := func(code adaptersv1.ReasonCode, message string) {
		reasons = append(reasons, &adaptersv1.NegotiationReason{
			Code: code, Message: message, Severity: adaptersv1.Severity_SEVERITY_BLOCKING,
		})
	}
	req := request.GetRequirements()
	required := adaptersv1.Requirement_REQUIREMENT_REQUIRED
	if req.GetToolUse() == required {
		block(adaptersv1.ReasonCode_REASON_CODE_TOOL_USE_UNSUPPORTED, "this worker runs no tools")
	}
	if req.GetStructuredToolCalls() == required {
		block(adaptersv1.ReasonCode_REASON_CODE_STRUCTURED_TOOL_CALLS_UNSUPPORTED, "no structured tool calls")
	}
	if req.GetApprovalInterrupts() == required {
		block(adaptersv1.ReasonCode_REASON_CODE_APPROVAL_INTERRUPT_UNSUPPORTED, "this worker cannot pause for approval")
	}
	if req.GetContinuationSupport() == required || request.GetResume() != nil {
		block(adaptersv1.ReasonCode_REASON_CODE_CONTINUATION_UNSUPPORTED, "this worker cannot resume a suspended turn")
	}
	attachments := false
	for _, part := range request.GetInput().GetParts() {
		if part.GetText() == nil {
			attachments = true
		}
	}
	if req.GetAttachments() == required || attachments {
		block(adaptersv1.ReasonCode_REASON_CODE_ATTACHMENTS_UNSUPPORTED, "this worker reads text only")
	}
	if request.GetSchemaVersion() > capabilities.SchemaVersion {
		block(adaptersv1.ReasonCode_REASON_CODE_SCHEMA_VERSION_UNSUPPORTED, "the request's schema is newer")
	}
	degraded := false
	if req.GetTraceDepth() > capabilities.TraceDepth {
		degraded = true
		reasons = append(reasons, &adaptersv1.NegotiationReason{
			Code:     adaptersv1.ReasonCode_REASON_CODE_TRACE_DEPTH_REDUCED,
			Message:  "only a minimal trace is kept",
			Severity: adaptersv1.Severity_SEVERITY_WARNING,
		})
	}
	supported := true
	for _, r := range reasons {
		if r.Severity == adaptersv1.Severity_SEVERITY_BLOCKING {
			supported = false
		}
	}
	return &adaptersv1.ExecutionNegotiation{
		Supported: supported, Degraded: degraded, Reasons: reasons, EffectiveCapabilities: capabilities,
	}
}

func textOf(m *corev1.Message) string {
	var b strings.Builder
	for _, part := range m.GetParts() {
		b.WriteString(part.GetText().GetText())
	}
	return b.String()
}

type worker struct {
	client    adaptersv1.WorkerServiceClient
	ctx       context.Context
	backend   string
	wordDelay time.Duration
	workerID  string
	session   string
	mu        sync.Mutex
	running   map[string]chan struct{}
}

func (w *worker) ref(offer *adaptersv1.WorkOffer) *adaptersv1.WorkRef {
	return &adaptersv1.WorkRef{
		WorkerId: w.workerID, Session: w.session,
		ExecutionId: offer.GetExecutionId(), Attempt: offer.GetAttempt(),
	}
}

func (w *worker) call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(w.ctx, 10*time.Second)
}

// maxEventsPerCall is how many events one ReportWorkEvents / CompleteWork call may carry.
const maxEventsPerCall = 256

// runTurn runs one turn. Progress is batched: deltas are reported only before
// the worker waits (so the client sees them while it does) or when 256 have
// piled up; the rest ride on CompleteWork as trailing events, so a turn with
// no waits is one ClaimWork and one CompleteWork.
func (w *worker) runTurn(offer *adaptersv1.WorkOffer, cancel chan struct{}) {
	defer func() {
		w.mu.Lock()
		delete(w.running, offer.GetExecutionId())
		w.mu.Unlock()
	}()
	ref := w.ref(offer)
	words := strings.Split("echo: "+textOf(offer.GetRequest().GetInput()), " ")
	reply := ""
	outcome := "completed"
	var pending []*adaptersv1.ExecutionEvent
	reports := 0
	failed := func(err error) {
		emit(map[string]interface{}{"step": "turn_failed", "execution_id": offer.GetExecutionId(), "error": err.Error()})
	}
	// flush reports the pending events; false when the attempt is no longer ours.
	flush := func() (bool, error) {
		if len(pending) == 0 {
			return true, nil
		}
		ctx, done := w.call()
		defer done()
		answer, err := w.client.ReportWorkEvents(ctx, &adaptersv1.ReportWorkEventsRequest{Work: ref, Events: pending})
		if err != nil {
			return false, err
		}
		reports++
		pending = nil
		return answer.GetCurrent(), nil
	}
	for i, word := range words {
		waits := i > 0 && w.wordDelay > 0
		if waits || len(pending) >= maxEventsPerCall {
			current, err := flush()
			if err != nil {
				failed(err)
				return
			}
			if !current {
				emit(map[string]interface{}{"step": "stale", "execution_id": offer.GetExecutionId()})
				return
			}
		}
		if i > 0 {
			if waits {
				select {
				case <-cancel:
					outcome = "cancelled"
				case <-time.After(w.wordDelay):
				}
			} else {
				select {
				case <-cancel:
					outcome = "cancelled"
				default:
				}
			}
			if outcome == "cancelled" {
				break
			}
			word = " " + word
		}
		reply += word
		pending = append(pending, &adaptersv1.ExecutionEvent{
			Kind: &adaptersv1.ExecutionEvent_TextDelta{TextDelta: &adaptersv1.TextDelta{Text: word}},
		})
	}
	result := &adaptersv1.ExecutionResult{SchemaVersion: 1}
	if outcome == "cancelled" {
		result.Outcome = &adaptersv1.ExecutionResult_Cancelled{Cancelled: &adaptersv1.ExecutionCancelled{}}
	} else {
		result.Outcome = &adaptersv1.ExecutionResult_Completed{Completed: &adaptersv1.ExecutionCompleted{}}
		result.Messages = []*corev1.Message{{
			Role:  corev1.Role_ROLE_ASSISTANT,
			Parts: []*corev1.Part{{Kind: &corev1.Part_Text{Text: &corev1.TextPart{Text: reply}}}},
		}}
	}
	trailing := len(pending)
	ctx, done := w.call()
	defer done()
	completed, err := w.client.CompleteWork(ctx, &adaptersv1.CompleteWorkRequest{Work: ref, Result: result, Events: pending})
	if err != nil {
		failed(err)
		return
	}
	emit(map[string]interface{}{
		"step": outcome, "execution_id": offer.GetExecutionId(), "attempt": offer.GetAttempt(),
		"accepted": completed.GetAccepted(), "reply": reply,
		"reports": reports, "trailing_events": trailing,
	})
}

func (w *worker) onOffer(offer *adaptersv1.WorkOffer) {
	negotiation := negotiate(offer.GetRequest())
	emit(map[string]interface{}{
		"step": "offer", "execution_id": offer.GetExecutionId(), "attempt": offer.GetAttempt(),
		"supported": negotiation.GetSupported(),
	})
	ctx, done := w.call()
	answer, err := w.client.ClaimWork(ctx, &adaptersv1.ClaimWorkRequest{Work: w.ref(offer), Negotiation: negotiation})
	done()
	if err != nil {
		emit(map[string]interface{}{"step": "claim_failed", "execution_id": offer.GetExecutionId(), "error": err.Error()})
		return
	}
	emit(map[string]interface{}{
		"step": "claim", "execution_id": offer.GetExecutionId(), "granted": answer.GetGranted(), "reason": answer.GetReason(),
	})
	if !answer.GetGranted() || !negotiation.GetSupported() {
		return
	}
	cancel := make(chan struct{})
	w.mu.Lock()
	w.running[offer.GetExecutionId()] = cancel
	w.mu.Unlock()
	go w.runTurn(offer, cancel)
}

// serve holds one session: connect, then follow the command stream until it ends.
func (w *worker) serve(registration *adaptersv1.WorkerRegistration, heartbeat time.Duration) error {
	ctx, stop := context.WithCancel(w.ctx)
	defer stop()
	stream, err := w.client.ConnectWorker(ctx, &adaptersv1.ConnectWorkerRequest{Worker: registration})
	if err != nil {
		return err
	}
	for {
		command, err := stream.Recv()
		if err != nil {
			return err
		}
		switch c := command.GetCommand().(type) {
		case *adaptersv1.ConnectWorkerResponse_Connected:
			w.workerID, w.session = c.Connected.GetWorkerId(), c.Connected.GetSession()
			emit(map[string]interface{}{
				"step": "connected", "worker_id": w.workerID, "backend": w.backend,
				"ttl_ms": c.Connected.GetTtlMs(), "pid": os.Getpid(),
			})
			go func(session string) {
				ticker := time.NewTicker(heartbeat)
				defer ticker.Stop()
				for {
					select {
					case <-ctx.Done():
						return
					case <-ticker.C:
					}
					w.mu.Lock()
					inFlight := uint32(len(w.running))
					w.mu.Unlock()
					call, done := w.call()
					_, err := w.client.WorkerHeartbeat(call, &adaptersv1.WorkerHeartbeatRequest{
						WorkerId: w.workerID, Session: session, InFlight: inFlight,
					})
					done()
					if err != nil {
						emit(map[string]interface{}{"step": "heartbeat_failed", "error": err.Error()})
						if status.Code(err) == codes.NotFound {
							stop() // the lease is gone: connect again
							return
						}
					}
				}
			}(w.session)
		case *adaptersv1.ConnectWorkerResponse_Offer:
			go w.onOffer(c.Offer)
		case *adaptersv1.ConnectWorkerResponse_Cancel:
			emit(map[string]interface{}{
				"step": "cancel", "execution_id": c.Cancel.GetExecutionId(), "reason": c.Cancel.GetReason(),
			})
			w.mu.Lock()
			if ch, ok := w.running[c.Cancel.GetExecutionId()]; ok {
				close(ch)
				delete(w.running, c.Cancel.GetExecutionId())
			}
			w.mu.Unlock()
		}
	}
}

func main() {
	address := flag.String("url", env("TRELLIS_URL", "http://127.0.0.1:8080"), "Trellis URL")
	apiKey := flag.String("api-key", os.Getenv("TRELLIS_API_KEY"), "an admin API key")
	apiKeyFile := flag.String("api-key-file", env("TRELLIS_API_KEY_FILE", ".trellis/data/admin-api-key"), "a file holding it")
	backend := flag.String("backend", "go-echo", "backend id")
	workerID := flag.String("worker-id", "", "worker id (default: assigned)")
	capacity := flag.Uint("capacity", 2, "executions at once")
	heartbeatMs := flag.Uint("heartbeat-ms", 1000, "heartbeat interval")
	wordDelay := flag.Duration("word-delay", 50*time.Millisecond, "pause between streamed words")
	flag.Parse()

	key := strings.TrimSpace(*apiKey)
	if key == "" {
		data, err := ioutil.ReadFile(*apiKeyFile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "echo_worker: no API key (%v)\n", err)
			os.Exit(2)
		}
		key = strings.TrimSpace(string(data))
	}
	parsed, err := url.Parse(*address)
	if err != nil || parsed.Scheme != "http" || parsed.Host == "" {
		fmt.Fprintf(os.Stderr, "echo_worker: -url must be http://host:port, got %q\n", *address)
		os.Exit(2)
	}
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	conn, err := grpc.DialContext(ctx, parsed.Host, grpc.WithInsecure())
	if err != nil {
		fmt.Fprintf(os.Stderr, "echo_worker: %v\n", err)
		os.Exit(1)
	}
	defer conn.Close()
	w := &worker{
		client:    adaptersv1.NewWorkerServiceClient(conn),
		ctx:       metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key),
		backend:   *backend,
		wordDelay: *wordDelay,
		running:   map[string]chan struct{}{},
	}
	go func() {
		<-signals
		if w.workerID != "" {
			call, done := context.WithTimeout(w.ctx, 5*time.Second)
			_, _ = w.client.DisconnectWorker(call, &adaptersv1.DisconnectWorkerRequest{WorkerId: w.workerID, Session: w.session})
			done()
		}
		emit(map[string]interface{}{"step": "left"})
		cancel()
	}()
	registration := &adaptersv1.WorkerRegistration{
		SchemaVersion: 1, WorkerId: *workerID, BackendId: *backend, Capabilities: capabilities,
		Capacity: uint32(*capacity), HeartbeatIntervalMs: uint32(*heartbeatMs),
	}
	for ctx.Err() == nil {
		err := w.serve(registration, time.Duration(*heartbeatMs)*time.Millisecond)
		if ctx.Err() != nil {
			return
		}
		switch status.Code(err) {
		case codes.Unauthenticated, codes.PermissionDenied, codes.InvalidArgument:
			fmt.Fprintf(os.Stderr, "echo_worker: RPC failed: %v\n", err)
			os.Exit(1)
		}
		emit(map[string]interface{}{"step": "reconnecting", "error": fmt.Sprint(err)})
		time.Sleep(time.Second)
	}
}
