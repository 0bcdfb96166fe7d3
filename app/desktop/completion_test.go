package desktop

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// The embedded model has no chat template: the chat says it is a
// completion model (the message box, the reply's header), and
// shows its reply as the continuation of the message, dimmed in front;
// the reply itself (kept, copied) is the model's text alone.
func TestChatCompletionModel(t *testing.T) {
	a := started(t, Options{})
	greedy(a)
	if a.chat.input.PlaceHolder != completionPlaceholder {
		t.Errorf("placeholder %q", a.chat.input.PlaceHolder)
	}
	got := send(t, a, "Once upon a time")
	if !got.Completion || got.Prompt != "Once upon a time" || strings.HasPrefix(got.Content, "Once upon a time") {
		t.Fatalf("reply %+v", got)
	}
	v := a.chat.views[1]
	if !strings.Contains(v.who.Text, "completion") {
		t.Errorf("header %q", v.who.Text)
	}
	for _, hl := range []bool{true, false} {
		a.chat.hl.SetChecked(hl)
		runs := v.body.runs
		if runs[0].Text != got.Prompt || runs[0].Color != theme.ColorNamePlaceHolder || v.body.String() != got.Prompt+got.Content {
			t.Errorf("colour %v: shown %q, first run %+v", hl, v.body.String(), runs[0])
		}
	}
	test.Tap(v.actions.Objects[0].(*widget.Button))
	if c := a.fy.Clipboard().Content(); c != got.Content {
		t.Errorf("copied %q", c)
	}
}
