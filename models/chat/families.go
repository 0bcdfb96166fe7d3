package chat

import "strings"

// Family is a chat markup convention. The Go formatters reproduce what the
// reference template of each family renders (see the tests), without the
// template's checks: a conversation the template would refuse is formatted
// as best it can be rather than failing, since the formatters are a
// fallback.
type Family string

const (
	// Plain is for models without a template: "role: content" lines and an
	// "assistant:" cue, which base models continue reasonably.
	Plain Family = "plain"
	// Raw joins the contents with newlines and adds nothing: for models
	// that are not chat models at all (the embedded TinyStories model),
	// where any markup would only be text the model never saw.
	Raw     Family = "raw"
	Llama2  Family = "llama2"  // [INST] … [/INST] with <<SYS>>
	Llama3  Family = "llama3"  // <|start_header_id|>role<|end_header_id|>
	ChatML  Family = "chatml"  // <|im_start|>role … <|im_end|> (Qwen, Hermes, …)
	Mistral Family = "mistral" // [INST] … [/INST] without a system block
	Zephyr  Family = "zephyr"  // <|role|> … </s>
	Phi3    Family = "phi3"    // <|role|> … <|end|>
	Gemma   Family = "gemma"   // <start_of_turn>role … <end_of_turn>
)

// Detect recognises a template's family by the markers it writes; Plain
// when there are none.
func Detect(src string) Family {
	has := func(s string) bool { return strings.Contains(src, s) }
	switch {
	case has("<|start_header_id|>"):
		return Llama3
	case has("<|im_start|>"):
		return ChatML
	case has("<start_of_turn>"):
		return Gemma
	case has("<|user|>") && has("<|end|>"):
		return Phi3
	case has("<|user|>"):
		return Zephyr
	case has("[INST]") && has("<<SYS>>"):
		return Llama2
	case has("[INST]"):
		return Mistral
	}
	return Plain
}

func (f Family) format(msgs []Message, gen bool, bos, eos string) string {
	var b strings.Builder
	switch f {
	case Raw:
		for i, m := range msgs {
			if i > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(m.Content)
		}
	case Llama2:
		sys, rest := splitSystem(msgs)
		for i, m := range rest {
			c := m.Content
			if i == 0 && sys != "" {
				c = "<<SYS>>\n" + sys + "\n<</SYS>>\n\n" + c
			}
			if m.Role == "assistant" {
				b.WriteString(" " + strings.TrimSpace(c) + " " + eos)
			} else {
				b.WriteString(bos + "[INST] " + strings.TrimSpace(c) + " [/INST]")
			}
		}
	case Mistral:
		sys, rest := splitSystem(msgs)
		b.WriteString(bos)
		for i, m := range rest {
			c := m.Content
			if i == 0 && sys != "" {
				c = sys + "\n\n" + c
			}
			if m.Role == "assistant" {
				b.WriteString(c + eos + " ")
			} else {
				b.WriteString("[INST] " + c + " [/INST]")
			}
		}
	case Llama3:
		b.WriteString(bos)
		for _, m := range msgs {
			b.WriteString("<|start_header_id|>" + m.Role + "<|end_header_id|>\n\n" + strings.TrimSpace(m.Content) + "<|eot_id|>")
		}
		if gen {
			b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
		}
	case ChatML:
		for _, m := range msgs {
			b.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n")
		}
		if gen {
			b.WriteString("<|im_start|>assistant\n")
		}
	case Zephyr:
		for _, m := range msgs {
			b.WriteString("<|" + m.Role + "|>\n" + m.Content + eos + "\n")
		}
		if gen {
			b.WriteString("<|assistant|>\n")
		}
	case Phi3:
		for _, m := range msgs {
			b.WriteString("<|" + m.Role + "|>\n" + m.Content + "<|end|>\n")
		}
		if gen {
			b.WriteString("<|assistant|>\n")
		} else {
			b.WriteString(eos)
		}
	case Gemma:
		sys, rest := splitSystem(msgs)
		b.WriteString(bos)
		for i, m := range rest {
			role, c := m.Role, m.Content
			if role == "assistant" {
				role = "model"
			}
			if i == 0 && sys != "" {
				c = sys + "\n\n" + c
			}
			b.WriteString("<start_of_turn>" + role + "\n" + strings.TrimSpace(c) + "<end_of_turn>\n")
		}
		if gen {
			b.WriteString("<start_of_turn>model\n")
		}
	default: // Plain
		for _, m := range msgs {
			b.WriteString(m.Role + ": " + m.Content + "\n")
		}
		if gen {
			b.WriteString("assistant:")
		}
	}
	return b.String()
}

// splitSystem takes a leading system message out, for families that fold
// it into the first user turn.
func splitSystem(msgs []Message) (string, []Message) {
	if len(msgs) > 0 && msgs[0].Role == "system" {
		return msgs[0].Content, msgs[1:]
	}
	return "", msgs
}
