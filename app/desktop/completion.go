package desktop

import "dovetail/app/runner"

// Placeholders of the message box: a chat model answers, a completion
// model continues.
const (
	chatPlaceholder       = "Message (Enter sends, Shift+Enter: a new line)"
	completionPlaceholder = "The start of a text (Enter sends): a completion model continues it"
)

// showModelKind says in the chat whether the loaded model chats or
// continues text.
func (c *chatView) showModelKind(m *runner.Model) {
	if m != nil && m.IsCompletion() {
		c.input.SetPlaceHolder(completionPlaceholder)
		return
	}
	c.input.SetPlaceHolder(chatPlaceholder)
}

// markCompletion marks a reply under way as a completion model's; one
// that continues the prompt's text shows the last message in front of it.
func markCompletion(m *runner.Model, reply *Message, msgs []Message) {
	if m == nil || !m.IsCompletion() {
		return
	}
	reply.Completion = true
	if !m.ContinuesPrompt() {
		return
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			reply.Prompt = msgs[i].Content
			return
		}
	}
}
