// Command chat_approval runs a chat turn with an approval against a running
// Trellis over plain gRPC, with the generated Go stubs — the Go twin of
// clients/python/examples/chat_approval.py:
//
//  1. AgentService/CreateAgent: a scripted agent that asks, suspends for the
//     "approval" signal, then says "Email sent.";
//  2. ChatService/Send: the turn comes back suspended, naming the signal;
//  3. ChatService/Subscribe, then SignalService/Deliver once the listener is
//     registered;
//  4. the resumed turn's outcome from the listener, and ChatService/GetHistory.
//
// Flags override the environment: -url (TRELLIS_URL, default
// http://127.0.0.1:8080), -api-key (TRELLIS_API_KEY), -api-key-file
// (TRELLIS_API_KEY_FILE, default .trellis/data/admin-api-key), -json.
// Exit status 0 when the turn completed after the approval, 1 otherwise.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/ioutil"
	"net/url"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	chatv1 "trellis.dev/clients/go/gen/trellis/chat/v1"
	corev1 "trellis.dev/clients/go/gen/trellis/core/v1"
	tasksv1 "trellis.dev/clients/go/gen/trellis/tasks/v1"
)

const timeout = 30 * time.Second

var approvalGraph = map[string]interface{}{
	"entry": "ask",
	"nodes": map[string]interface{}{
		"ask":  map[string]interface{}{"update": map[string]interface{}{"messages": []interface{}{map[string]interface{}{"role": "assistant", "content": "May I send the email?"}}}},
		"wait": map[string]interface{}{"suspend": map[string]interface{}{"signal_id": "approval"}},
		"sent": map[string]interface{}{"update": map[string]interface{}{"messages": []interface{}{map[string]interface{}{"role": "assistant", "content": "Email sent."}}}},
	},
	"edges": []interface{}{
		map[string]interface{}{"from": "ask", "to": "wait"},
		map[string]interface{}{"from": "wait", "to": "sent"},
		map[string]interface{}{"from": "sent", "to": "END"},
	},
}

type summary struct {
	AgentID   string   `json:"agent_id"`
	SessionID string   `json:"session_id"`
	TaskID    string   `json:"task_id"`
	SignalID  string   `json:"signal_id"`
	Pending   []string `json:"pending"`
	Outcome   string   `json:"outcome"`
	Replies   []string `json:"replies"`
	History   []string `json:"history"`
}

func env(name, fallback string) string {
	if value := os.Getenv(name); value != "" {
		return value
	}
	return fallback
}

func textOf(m *corev1.Message) string {
	var b strings.Builder
	for _, part := range m.GetParts() {
		b.WriteString(part.GetText().GetText())
	}
	return b.String()
}

func run(ctx context.Context, target, key string) (*summary, error) {
	conn, err := grpc.DialContext(ctx, target, grpc.WithInsecure(), grpc.WithBlock())
	if err != nil {
		return nil, fmt.Errorf("cannot reach Trellis at %s: %w", target, err)
	}
	defer conn.Close()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
	agents := tasksv1.NewAgentServiceClient(conn)
	signals := tasksv1.NewSignalServiceClient(conn)
	chat := chatv1.NewChatServiceClient(conn)

	definition, err := structpb.NewStruct(approvalGraph)
	if err != nil {
		return nil, err
	}
	created, err := agents.CreateAgent(ctx, &tasksv1.CreateAgentRequest{
		Agent: &tasksv1.Agent{Name: "go-approver", Backend: "scripted", Definition: definition},
	})
	if err != nil {
		return nil, err
	}
	out := &summary{AgentID: created.GetAgent().GetId(), SessionID: fmt.Sprintf("ses_go_%x", time.Now().UnixNano())}
	fmt.Printf("agent: %s\n", out.AgentID)

	sent, err := chat.Send(ctx, &chatv1.SendRequest{
		SessionId: out.SessionID,
		AgentId:   out.AgentID,
		Message: &corev1.Message{
			Role:  corev1.Role_ROLE_USER,
			Parts: []*corev1.Part{{Kind: &corev1.Part_Text{Text: &corev1.TextPart{Text: "email Bob"}}}},
		},
	})
	if err != nil {
		return nil, err
	}
	suspended := sent.GetOutcome().GetSuspended()
	if suspended == nil {
		return nil, fmt.Errorf("expected a suspended turn, got %v", sent.GetOutcome())
	}
	out.TaskID = sent.GetOutcome().GetTaskId()
	out.SignalID = suspended.GetSignalDescriptor().GetSignalId()
	fmt.Printf("send: suspended task=%s signal=%s\n", out.TaskID, out.SignalID)
	for _, m := range suspended.GetPendingMessages() {
		out.Pending = append(out.Pending, textOf(m))
		fmt.Printf("  pending: %s\n", textOf(m))
	}

	listenCtx, stopListening := context.WithCancel(ctx)
	defer stopListening()
	stream, err := chat.Subscribe(listenCtx, &chatv1.SubscribeRequest{SessionId: out.SessionID})
	if err != nil {
		return nil, err
	}
	first, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	if first.GetSubscribed() == nil {
		return nil, fmt.Errorf("Subscribe did not start with subscribed: %v", first)
	}
	fmt.Printf("subscribe: subscribed session=%s\n", first.GetSubscribed().GetSessionId())

	payload, err := structpb.NewValue(map[string]interface{}{"approved": true})
	if err != nil {
		return nil, err
	}
	delivered, err := signals.Deliver(ctx, &tasksv1.DeliverRequest{SignalId: out.SignalID, Payload: payload})
	if err != nil {
		return nil, err
	}
	fmt.Printf("deliver: task=%s duplicate=%v\n", delivered.GetTaskId(), delivered.GetDuplicate())

	next, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	resumed := next.GetOutcome()
	switch {
	case resumed.GetCompleted() != nil:
		out.Outcome = "completed"
	case resumed.GetErrored() != nil:
		out.Outcome = "errored"
	case resumed.GetSuspended() != nil:
		out.Outcome = "suspended"
	}
	fmt.Printf("outcome: %s task=%s\n", out.Outcome, resumed.GetTaskId())
	for _, m := range resumed.GetCompleted().GetReplies() {
		out.Replies = append(out.Replies, textOf(m))
		fmt.Printf("  reply: %s\n", textOf(m))
	}
	if out.Outcome != "completed" {
		return nil, fmt.Errorf("the resumed turn did not complete: %v", resumed)
	}

	history, err := chat.GetHistory(ctx, &chatv1.GetHistoryRequest{SessionId: out.SessionID})
	if err != nil {
		return nil, err
	}
	fmt.Println("history:")
	for _, m := range history.GetMessages() {
		role := strings.ToLower(strings.TrimPrefix(m.GetRole().String(), "ROLE_"))
		out.History = append(out.History, role+": "+textOf(m))
		fmt.Printf("  %s: %s\n", role, textOf(m))
	}
	return out, nil
}

func main() {
	rawURL := flag.String("url", env("TRELLIS_URL", "http://127.0.0.1:8080"), "Trellis base URL (http, h2c)")
	key := flag.String("api-key", os.Getenv("TRELLIS_API_KEY"), "API key")
	keyFile := flag.String("api-key-file", env("TRELLIS_API_KEY_FILE", ".trellis/data/admin-api-key"), "file holding the API key")
	asJSON := flag.Bool("json", false, "print a JSON summary last")
	flag.Parse()

	parsed, err := url.Parse(*rawURL)
	if err != nil || parsed.Scheme != "http" || parsed.Host == "" {
		fmt.Fprintf(os.Stderr, "chat_approval: -url must be http://host:port, got %q\n", *rawURL)
		os.Exit(2)
	}
	if *key == "" {
		data, err := ioutil.ReadFile(*keyFile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "chat_approval: no API key: set TRELLIS_API_KEY or -api-key-file (%v)\n", err)
			os.Exit(2)
		}
		*key = strings.TrimSpace(string(data))
	}

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := run(ctx, parsed.Host, *key)
	if err != nil {
		if st, ok := status.FromError(err); ok && !errors.Is(err, context.DeadlineExceeded) {
			fmt.Fprintf(os.Stderr, "chat_approval: RPC failed: %s: %s\n", st.Code(), st.Message())
			for _, d := range st.Details() {
				if detail, ok := d.(*corev1.ErrorDetail); ok {
					fmt.Fprintf(os.Stderr, "  reason=%s domain=%s\n", detail.GetReason(), detail.GetDomain())
				}
			}
		} else {
			fmt.Fprintf(os.Stderr, "chat_approval: %v\n", err)
		}
		os.Exit(1)
	}
	if *asJSON {
		encoded, _ := json.Marshal(out)
		fmt.Println(string(encoded))
	}
}
