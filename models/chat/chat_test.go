package chat

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"dovetail/internal/golden"
	"dovetail/models/gguf"
)

// conversations are rendered with every template. "system" has padding
// spaces so that the templates' trim/strip calls show; "multi" has a
// newline inside a message.
var conversations = map[string][]Message{
	"user":   {{"user", "Hello there!"}},
	"system": {{"system", "You are a pirate."}, {"user", " Hello there! "}},
	"multi":  {{"user", "Hi"}, {"assistant", " Ahoy! "}, {"user", "Where is\nthe gold?"}},
}

type model struct {
	src      string
	bos, eos string
	family   Family
	// own: the template does something its family's formatter does not
	// (a default system message, dropped system messages, an
	// unconditional generation prompt), so only Jinja is compared.
	own bool
}

var templates = map[string]model{
	"llama2":     {llama2Template, "<s>", "</s>", Llama2, false},
	"llama3":     {llama3Template, "<|begin_of_text|>", "<|eot_id|>", Llama3, false},
	"llama3gguf": {llama3GGUFTemplate, "<|begin_of_text|>", "<|eot_id|>", Llama3, true},
	"qwen2":      {qwen2Template, "", "<|im_end|>", ChatML, true},
	"chatml":     {chatmlTemplate, "<s>", "<|im_end|>", ChatML, false},
	"mistral":    {mistralTemplate, "<s>", "</s>", Mistral, false},
	"zephyr":     {zephyrTemplate, "<s>", "</s>", Zephyr, false},
	"phi3":       {phi3Template, "<s>", "<|endoftext|>", Phi3, false},
	"phi3gguf":   {phi3GGUFTemplate, "<s>", "<|endoftext|>", Phi3, true},
	"gemma":      {gemmaTemplate, "<bos>", "<eos>", Gemma, false},
}

func key(name, conv string, gen bool) string {
	g := "False"
	if gen {
		g = "True"
	}
	return fmt.Sprintf("%s/%s/%s", name, conv, g)
}

// The model's own template, rendered by gonja, gives exactly what
// transformers' apply_chat_template gives (jinjaWant), including the
// templates' refusals.
func TestJinjaMatchesTransformers(t *testing.T) {
	for name, m := range templates {
		tpl := New(m.src, m.bos, m.eos)
		if !tpl.Jinja() {
			t.Fatalf("%s: template did not compile: %v", name, tpl.parseErr)
		}
		if tpl.Family() != m.family {
			t.Errorf("%s: family %s, want %s", name, tpl.Family(), m.family)
		}
		for conv, msgs := range conversations {
			for _, gen := range []bool{true, false} {
				k := key(name, conv, gen)
				want, ok := jinjaWant[k]
				if !ok {
					t.Fatalf("no expected output for %s", k)
				}
				got, err := tpl.Render(msgs, gen)
				if err != nil {
					var te *TemplateError
					if !errors.As(err, &te) {
						t.Errorf("%s: error %v is not a *TemplateError", k, err)
						continue
					}
					got = "ERROR: " + te.Message
				}
				if got != want {
					t.Errorf("%s:\n got %q\nwant %q", k, got, want)
				}
			}
		}
	}
}

// The Go formatters, used when a template cannot be rendered, agree with
// the reference templates wherever the template accepts the conversation.
func TestFamilyFormattersMatchTemplates(t *testing.T) {
	for name, m := range templates {
		if m.own {
			continue
		}
		tpl := NewFamily(m.family, m.bos, m.eos)
		for conv, msgs := range conversations {
			for _, gen := range []bool{true, false} {
				k := key(name, conv, gen)
				want := jinjaWant[k]
				got, err := tpl.Render(msgs, gen)
				if err != nil {
					t.Fatalf("%s: %v", k, err)
				}
				if len(want) > 6 && want[:6] == "ERROR:" {
					continue
				}
				if got != want {
					t.Errorf("%s:\n got %q\nwant %q", k, got, want)
				}
			}
		}
	}
}

// Conversations the reference templates refuse still get a prompt from the
// formatters: the system message goes into the first user turn.
func TestFamilyFormattersFoldSystem(t *testing.T) {
	msgs := conversations["system"]
	for _, c := range []struct {
		f    Family
		want string
	}{
		{Mistral, "<s>[INST] You are a pirate.\n\n Hello there!  [/INST]"},
		{Gemma, "<bos><start_of_turn>user\nYou are a pirate.\n\n Hello there!<end_of_turn>\n<start_of_turn>model\n"},
	} {
		got, _ := NewFamily(c.f, templates[string(c.f)].bos, templates[string(c.f)].eos).Render(msgs, true)
		if got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.f, got, c.want)
		}
	}
}

// A template using a Python feature the engine lacks falls back to the
// formatter of the family its markers name.
func TestFallbackWhenTemplateFails(t *testing.T) {
	for _, src := range []string{
		// Parses, but the method does not exist in gonja.
		"{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'].removeprefix('x') + '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
		// Does not parse.
		"{% for m in messages %}{{ '<|im_start|>' + m['role'] {% endfor %}",
	} {
		tpl := New(src, "<s>", "</s>")
		got, err := tpl.Render(conversations["multi"], true)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if want := jinjaWant["chatml/multi/True"]; got != want {
			t.Errorf("%q:\n got %q\nwant %q", src, got, want)
		}
	}
}

func TestPlainAndRaw(t *testing.T) {
	msgs := conversations["multi"]
	for _, c := range []struct {
		tpl  *Template
		gen  bool
		want string
	}{
		{New("", "<s>", "</s>"), true, "user: Hi\nassistant:  Ahoy! \nuser: Where is\nthe gold?\nassistant:"},
		{New("  \n", "<s>", "</s>"), false, "user: Hi\nassistant:  Ahoy! \nuser: Where is\nthe gold?\n"},
		{New("{{ messages[0]['content'] }}", "", ""), true, "Hi"}, // no markers, but renders
		{NewFamily(Raw, "<s>", "</s>"), true, "Hi\n Ahoy! \nWhere is\nthe gold?"},
		{NewFamily(Raw, "<s>", "</s>"), false, "Hi\n Ahoy! \nWhere is\nthe gold?"},
	} {
		got, err := c.tpl.Render(msgs, c.gen)
		if err != nil || got != c.want {
			t.Errorf("%s gen=%v: got %q, %v; want %q", c.tpl.Family(), c.gen, got, err, c.want)
		}
	}
	if _, err := New("", "", "").Render(nil, true); err == nil {
		t.Error("no messages: no error")
	}
}

// The templates stored in the test vocabularies' GGUF files are the ones
// above, so those constants are what real files carry.
func TestGGUFTemplates(t *testing.T) {
	for file, want := range map[string]string{
		"ggml-vocab-phi-3.gguf":     phi3GGUFTemplate,
		"ggml-vocab-llama-bpe.gguf": llama3GGUFTemplate,
	} {
		f, err := gguf.Open(filepath.Join(golden.Root(), "golden", "tokenizer", file))
		if err != nil {
			t.Fatal(err)
		}
		src, _ := f.String(TemplateKey)
		if src != want {
			t.Errorf("%s: template\n%q\nwant\n%q", file, src, want)
		}
		tpl := FromGGUF(f, "<s>", "</s>")
		f.Close()
		if !tpl.Jinja() {
			t.Errorf("%s: template did not compile", file)
		}
	}
	f, err := gguf.Open(filepath.Join(golden.Root(), "golden", "tokenizer", "ggml-vocab-gpt-2.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if tpl := FromGGUF(f, "", ""); tpl.Jinja() || tpl.Family() != Plain {
		t.Errorf("file without template: jinja %v, family %s", tpl.Jinja(), tpl.Family())
	}
}

// A template cannot read files: {% include %} only sees the template.
func TestNoIncludeFromDisk(t *testing.T) {
	got, err := New("{% include '/etc/hostname' %}<|im_start|>", "", "").Render(conversations["user"], true)
	if err != nil {
		t.Fatal(err)
	}
	if want := jinjaWant["chatml/user/True"]; got != want {
		t.Errorf("got %q, want the ChatML fallback %q", got, want)
	}
}

func TestConcurrentRender(t *testing.T) {
	tpl := New(llama3Template, "<|begin_of_text|>", "<|eot_id|>")
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				got, err := tpl.Render(conversations["multi"], true)
				if err != nil || got != jinjaWant["llama3/multi/True"] {
					t.Errorf("got %q, %v", got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// jinjaWant is what Python's Jinja2 3.1.6 renders for each template,
// conversation and add_generation_prompt, in the environment transformers'
// apply_chat_template uses (ImmutableSandboxedEnvironment with trim_blocks,
// lstrip_blocks, loopcontrols, and a raise_exception that raises
// TemplateError; "ERROR: " and the message when it raised).
var jinjaWant = map[string]string{
	"chatml/multi/False":      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n Ahoy! <|im_end|>\n<|im_start|>user\nWhere is\nthe gold?<|im_end|>\n",
	"chatml/multi/True":       "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n Ahoy! <|im_end|>\n<|im_start|>user\nWhere is\nthe gold?<|im_end|>\n<|im_start|>assistant\n",
	"chatml/system/False":     "<|im_start|>system\nYou are a pirate.<|im_end|>\n<|im_start|>user\n Hello there! <|im_end|>\n",
	"chatml/system/True":      "<|im_start|>system\nYou are a pirate.<|im_end|>\n<|im_start|>user\n Hello there! <|im_end|>\n<|im_start|>assistant\n",
	"chatml/user/False":       "<|im_start|>user\nHello there!<|im_end|>\n",
	"chatml/user/True":        "<|im_start|>user\nHello there!<|im_end|>\n<|im_start|>assistant\n",
	"gemma/multi/False":       "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nAhoy!<end_of_turn>\n<start_of_turn>user\nWhere is\nthe gold?<end_of_turn>\n",
	"gemma/multi/True":        "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nAhoy!<end_of_turn>\n<start_of_turn>user\nWhere is\nthe gold?<end_of_turn>\n<start_of_turn>model\n",
	"gemma/system/False":      "ERROR: System role not supported",
	"gemma/system/True":       "ERROR: System role not supported",
	"gemma/user/False":        "<bos><start_of_turn>user\nHello there!<end_of_turn>\n",
	"gemma/user/True":         "<bos><start_of_turn>user\nHello there!<end_of_turn>\n<start_of_turn>model\n",
	"llama2/multi/False":      "<s>[INST] Hi [/INST] Ahoy! </s><s>[INST] Where is\nthe gold? [/INST]",
	"llama2/multi/True":       "<s>[INST] Hi [/INST] Ahoy! </s><s>[INST] Where is\nthe gold? [/INST]",
	"llama2/system/False":     "<s>[INST] <<SYS>>\nYou are a pirate.\n<</SYS>>\n\n Hello there! [/INST]",
	"llama2/system/True":      "<s>[INST] <<SYS>>\nYou are a pirate.\n<</SYS>>\n\n Hello there! [/INST]",
	"llama2/user/False":       "<s>[INST] Hello there! [/INST]",
	"llama2/user/True":        "<s>[INST] Hello there! [/INST]",
	"llama3/multi/False":      "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nAhoy!<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhere is\nthe gold?<|eot_id|>",
	"llama3/multi/True":       "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nAhoy!<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhere is\nthe gold?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
	"llama3/system/False":     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a pirate.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello there!<|eot_id|>",
	"llama3/system/True":      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a pirate.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello there!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
	"llama3/user/False":       "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello there!<|eot_id|>",
	"llama3/user/True":        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello there!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
	"llama3gguf/multi/False":  "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nAhoy!<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhere is\nthe gold?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
	"llama3gguf/multi/True":   "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nAhoy!<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhere is\nthe gold?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
	"llama3gguf/system/False": "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a pirate.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello there!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
	"llama3gguf/system/True":  "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a pirate.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello there!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
	"llama3gguf/user/False":   "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello there!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
	"llama3gguf/user/True":    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello there!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
	"mistral/multi/False":     "<s>[INST] Hi [/INST] Ahoy! </s> [INST] Where is\nthe gold? [/INST]",
	"mistral/multi/True":      "<s>[INST] Hi [/INST] Ahoy! </s> [INST] Where is\nthe gold? [/INST]",
	"mistral/system/False":    "ERROR: Conversation roles must alternate user/assistant/user/assistant/...",
	"mistral/system/True":     "ERROR: Conversation roles must alternate user/assistant/user/assistant/...",
	"mistral/user/False":      "<s>[INST] Hello there! [/INST]",
	"mistral/user/True":       "<s>[INST] Hello there! [/INST]",
	"phi3/multi/False":        "<|user|>\nHi<|end|>\n<|assistant|>\n Ahoy! <|end|>\n<|user|>\nWhere is\nthe gold?<|end|>\n<|endoftext|>",
	"phi3/multi/True":         "<|user|>\nHi<|end|>\n<|assistant|>\n Ahoy! <|end|>\n<|user|>\nWhere is\nthe gold?<|end|>\n<|assistant|>\n",
	"phi3/system/False":       "<|system|>\nYou are a pirate.<|end|>\n<|user|>\n Hello there! <|end|>\n<|endoftext|>",
	"phi3/system/True":        "<|system|>\nYou are a pirate.<|end|>\n<|user|>\n Hello there! <|end|>\n<|assistant|>\n",
	"phi3/user/False":         "<|user|>\nHello there!<|end|>\n<|endoftext|>",
	"phi3/user/True":          "<|user|>\nHello there!<|end|>\n<|assistant|>\n",
	"phi3gguf/multi/False":    "<s><|user|>\nHi<|end|>\n<|assistant|>\n Ahoy! <|end|>\n<|user|>\nWhere is\nthe gold?<|end|>\n<|assistant|>\n",
	"phi3gguf/multi/True":     "<s><|user|>\nHi<|end|>\n<|assistant|>\n Ahoy! <|end|>\n<|user|>\nWhere is\nthe gold?<|end|>\n<|assistant|>\n",
	"phi3gguf/system/False":   "<s><|user|>\n Hello there! <|end|>\n<|assistant|>\n",
	"phi3gguf/system/True":    "<s><|user|>\n Hello there! <|end|>\n<|assistant|>\n",
	"phi3gguf/user/False":     "<s><|user|>\nHello there!<|end|>\n<|assistant|>\n",
	"phi3gguf/user/True":      "<s><|user|>\nHello there!<|end|>\n<|assistant|>\n",
	"qwen2/multi/False":       "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n Ahoy! <|im_end|>\n<|im_start|>user\nWhere is\nthe gold?<|im_end|>\n",
	"qwen2/multi/True":        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n Ahoy! <|im_end|>\n<|im_start|>user\nWhere is\nthe gold?<|im_end|>\n<|im_start|>assistant\n",
	"qwen2/system/False":      "<|im_start|>system\nYou are a pirate.<|im_end|>\n<|im_start|>user\n Hello there! <|im_end|>\n",
	"qwen2/system/True":       "<|im_start|>system\nYou are a pirate.<|im_end|>\n<|im_start|>user\n Hello there! <|im_end|>\n<|im_start|>assistant\n",
	"qwen2/user/False":        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello there!<|im_end|>\n",
	"qwen2/user/True":         "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello there!<|im_end|>\n<|im_start|>assistant\n",
	"zephyr/multi/False":      "<|user|>\nHi</s>\n<|assistant|>\n Ahoy! </s>\n<|user|>\nWhere is\nthe gold?</s>\n",
	"zephyr/multi/True":       "<|user|>\nHi</s>\n<|assistant|>\n Ahoy! </s>\n<|user|>\nWhere is\nthe gold?</s>\n<|assistant|>\n",
	"zephyr/system/False":     "<|system|>\nYou are a pirate.</s>\n<|user|>\n Hello there! </s>\n",
	"zephyr/system/True":      "<|system|>\nYou are a pirate.</s>\n<|user|>\n Hello there! </s>\n<|assistant|>\n",
	"zephyr/user/False":       "<|user|>\nHello there!</s>\n",
	"zephyr/user/True":        "<|user|>\nHello there!</s>\n<|assistant|>\n",
}
