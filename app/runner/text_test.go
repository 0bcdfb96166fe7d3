package runner

import (
	"context"
	"slices"
	"strings"
	"testing"

	"dovetail/engine"
)

// GenerateText hands out text that adds up to the result, with every
// token once and in order; a stop string ends it before the string, and
// no piece ever shows a part of it; a round's texts are what its tokens
// added, from the drafter or the target.
func TestGenerateText(t *testing.T) {
	m := open(t, "")
	r := start(t, m, options(t))
	prompt := m.Tok.Encode("Once upon a time", true, false)
	var pieces []Piece
	var rounds strings.Builder
	var sources []engine.Source
	res, err := r.Slot(0).GenerateText(context.Background(), TextRequest{Prompt: prompt, MaxTokens: 60,
		Logprobs: true, TopLogprobs: 2,
		OnText: func(p Piece) error { pieces = append(pieces, p); return nil },
		OnRound: func(rd engine.Round, texts []string) {
			rounds.WriteString(strings.Join(texts, ""))
			sources = append(sources, rd.Sources...)
		}})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	var tokens []int
	var lps int
	for _, p := range pieces {
		if p.Text == "" {
			t.Error("a piece without text")
		}
		text.WriteString(p.Text)
		tokens = append(tokens, p.Tokens...)
		lps += len(p.Logprobs)
		if len(p.Logprobs) != len(p.Tokens) {
			t.Errorf("a piece of %d tokens with %d logprobs", len(p.Tokens), len(p.Logprobs))
		}
	}
	if res.Text == "" || text.String() != res.Text || rounds.String() != res.Text {
		t.Fatalf("pieces %q, rounds %q, result %q", text.String(), rounds.String(), res.Text)
	}
	if !slices.Equal(tokens, res.Tokens[:len(tokens)]) || len(res.Tokens) != res.GenTokens || len(sources) != res.GenTokens {
		t.Errorf("pieces' tokens %v of %v (%d generated, %d sources)", tokens, res.Tokens, res.GenTokens, len(sources))
	}
	if len(res.Logprobs) != res.GenTokens || res.Finish != res.StopReason {
		t.Errorf("%d logprobs for %d tokens, finish %q (the engine's %q)", len(res.Logprobs), res.GenTokens, res.Finish, res.StopReason)
	}

	// The same generation, cut where its text first says "the".
	cut := strings.Index(res.Text, " the")
	if cut < 0 {
		t.Fatalf("no \" the\" in %q", res.Text)
	}
	var shown strings.Builder
	stopped, err := r.Slot(0).GenerateText(context.Background(), TextRequest{Prompt: prompt, MaxTokens: 60, Stops: []string{" the"},
		OnText: func(p Piece) error {
			shown.WriteString(p.Text)
			if !strings.HasPrefix(res.Text[:cut], shown.String()) {
				t.Errorf("text %q shown past where the stop string begins", shown.String())
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if stopped.Text != res.Text[:cut] || shown.String() != stopped.Text || stopped.Finish != "stop" {
		t.Errorf("with stop \" the\": %q (shown %q), finish %q; want %q", stopped.Text, shown.String(), stopped.Finish, res.Text[:cut])
	}
}

// The embedded model writes its end-of-story text out in ordinary tokens
// ("<|", "end", "_story", "|>") before its EOS: that ends the reply as
// the token does, and no part of it reaches the text, the pieces or the
// rounds; --ignore-eos goes past it. A control token renders as nothing.
func TestGenerateTextHidesEndText(t *testing.T) {
	m := open(t, "")
	r := start(t, m, options(t))
	prompt := m.Tok.Encode("Once upon a time", true, false)
	var shown, rounds strings.Builder
	res, err := r.Slot(0).GenerateText(context.Background(), TextRequest{Prompt: prompt, MaxTokens: 400,
		OnText:  func(p Piece) error { shown.WriteString(p.Text); return nil },
		OnRound: func(_ engine.Round, texts []string) { rounds.WriteString(strings.Join(texts, "")) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Finish != "stop" || res.StopReason != "stop" || res.GenTokens >= 400 {
		t.Fatalf("finish %q (%q) after %d tokens: want the story's end", res.Finish, res.StopReason, res.GenTokens)
	}
	for what, s := range map[string]string{"text": res.Text, "pieces": shown.String(), "rounds": rounds.String()} {
		if strings.Contains(s, "<|") || strings.Contains(s, "end_story") {
			t.Errorf("%s show the end text: %q", what, s)
		}
	}
	if !strings.HasPrefix(res.Text, rounds.String()) {
		t.Errorf("rounds %q are not the start of the text %q", rounds.String(), res.Text)
	}
	all, err := r.Slot(0).GenerateText(context.Background(), TextRequest{Prompt: prompt, MaxTokens: len(res.Tokens) + 8, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(all.Text, "<|end_story|>") {
		t.Errorf("with IgnoreEOS the text goes on past the end text: %q", all.Text)
	}
	g := newTextGen(m, TextRequest{})
	if err := g.emit(m.Tok.BOS()); err != nil || g.text.String() != "" {
		t.Errorf("BOS renders as %q (%v)", g.text.String(), err)
	}
}
