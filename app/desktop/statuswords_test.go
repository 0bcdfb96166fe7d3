package desktop

import (
	"testing"

	"dovetail/app/runner"
)

// The status line names each kind of draft as it is, a published EAGLE
// draft by its kind and repository, never as "a custom draft".
func TestDraftWords(t *testing.T) {
	for name, want := range map[string]string{
		"none":          "no draft",
		"dgf:untrained": "a new draft on the CPU",
		"eagle3:/m/drafts/hf.co/yuhuili/EAGLE3-LLaMA3.1-Instruct-8B": "the EAGLE-3 draft yuhuili/EAGLE3-LLaMA3.1-Instruct-8B on the CPU",
		"eagle:/home/me/EAGLE-llama2-chat-7B":                        "the EAGLE draft EAGLE-llama2-chat-7B on the CPU",
	} {
		info := runner.DraftInfo{Name: name}
		if name != "none" {
			info.Device = "host"
		}
		if got := draftWords(info); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}
