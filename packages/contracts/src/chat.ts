// trellis.chat.v1: the harness-chat surface (ChatService: Send, SendStreaming, Subscribe, GetHistory).
export * from "./gen/trellis/chat/v1/chat_pb.js";
