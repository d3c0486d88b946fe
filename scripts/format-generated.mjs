// Generated code is committed; nothing to post-process yet, but keep the hook so
// `npm run generate` stays one command when a step is needed.
