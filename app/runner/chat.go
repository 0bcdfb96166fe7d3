package runner

import "dovetail/models/chat"

// ChatTokens renders a conversation with the model's chat template, with
// the assistant's turn opened, and tokenizes it. Templates write the BOS
// text themselves while the tokenizer also adds BOS, so a leading BOS text
// is dropped (as llama.cpp does) rather than giving the model two.
// Special-token texts are parsed only when a real chat template wrote
// them: in Plain and Raw prompts they can only come from the user's
// content. A template that refuses the conversation returns its
// *chat.TemplateError.
func (m *Model) ChatTokens(msgs []chat.Message) ([]int, error) {
	tpl := m.Chat
	text, err := tpl.Render(msgs, true)
	if err != nil {
		return nil, err
	}
	tok := m.Tok
	special := tpl.Jinja() || (tpl.Family() != chat.Plain && tpl.Family() != chat.Raw)
	if tok.AddBOS() && tok.BOS() >= 0 {
		if bos := tok.TokenText(tok.BOS()); bos != "" && special {
			for len(text) >= len(bos) && text[:len(bos)] == bos {
				text = text[len(bos):]
			}
		}
	}
	return tok.Encode(text, true, special), nil
}
