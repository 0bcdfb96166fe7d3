package runner

import (
	"context"
	"errors"
	"slices"
	"strings"

	"dovetail/engine"
	"dovetail/models/tokenizer"
)

// TextRequest is a generation of text on a slot: what every front end
// asks for, the tokens decoded by the model's tokenizer as they come.
type TextRequest struct {
	Prompt    []int
	MaxTokens int // ≤ 0: until the end of the context
	Sampler   engine.SamplerParams
	// IgnoreEOS generates past the model's end-of-generation tokens, and
	// past their texts written out in ordinary tokens.
	IgnoreEOS bool
	// Stops end generation where one of them begins in the text, which
	// then ends before it: the text holds back what could still grow into
	// one, so that no part of a stop string is ever handed out. The texts
	// of the model's end-of-generation tokens are stops as well (unless
	// IgnoreEOS).
	Stops []string
	// Logprobs gives each Piece its tokens' log-probabilities, with
	// TopLogprobs alternatives each.
	Logprobs    bool
	TopLogprobs int
	// OnText receives the text as soon as it is final (see Piece); an
	// error from it (the client went away) ends generation.
	OnText func(Piece) error
	// OnRound is told each round (engine.Request.OnRound) with texts[i],
	// what the round's token i made final in the text: a token that ends
	// inside a character adds "", the next the whole character; text held
	// back while it could be a stop string comes with the token that
	// releases it, and what generation's end releases only in the result.
	OnRound func(r engine.Round, texts []string)
}

// Piece is text that has become final: complete UTF-8, and past any
// point where a stop string could begin. Tokens are those generated since
// the last piece (text held back holds its tokens and their Logprobs
// back with it), so no piece is handed out without text.
type Piece struct {
	Text     string
	Tokens   []int
	Logprobs []engine.Logprob
}

// TextResult is what a text generation produced.
type TextResult struct {
	engine.Stats
	Text   string // without the stop string that ended it
	Tokens []int  // every generated token
	// Logprobs are every generated token's, when asked for, those of a
	// stop string's tokens included.
	Logprobs []engine.Logprob
	// Finish is "stop" when an end-of-generation token or a stop string
	// ended it, else the engine's reason ("length" or "cancelled").
	Finish string
}

// errStopString ends a generation whose text reached a stop string.
var errStopString = errors.New("stop string")

// GenerateText runs req on the slot with its drafter, decoding as it
// goes. The error is the engine's (or OnText's); the result holds what
// was generated before it. A generation that ctx cancelled hands out its
// held text too, as one that ended does.
func (s *Slot) GenerateText(ctx context.Context, req TextRequest) (TextResult, error) {
	g := newTextGen(s.r.model, req)
	st, err := s.Generate(ctx, g.request(), g.emit)
	res := TextResult{Stats: st, Finish: st.StopReason}
	if errors.Is(err, errStopString) {
		err = nil
	}
	if err == nil || ctx.Err() != nil {
		if ferr := g.finish(); err == nil {
			err = ferr
		}
	}
	if g.stopped {
		res.Finish, res.StopReason = "stop", "stop"
	}
	res.Text, res.Tokens, res.Logprobs = g.text.String(), g.tokens, g.all
	return res, err
}

// textGen is one text generation under way.
type textGen struct {
	req     TextRequest
	m       *Model
	dec     *tokenizer.StreamDecoder
	stops   stopMatcher
	stopped bool // a stop string ended it

	text    strings.Builder
	tokens  []int
	texts   []string         // what each token added, for OnRound
	since   int              // tokens[since:] ride with the next piece
	pending []engine.Logprob // their log-probabilities
	all     []engine.Logprob // every token's
}

func newTextGen(m *Model, req TextRequest) *textGen {
	stops := req.Stops
	if !req.IgnoreEOS {
		stops = append(slices.Clip(stops), m.Tok.EOGTexts()...)
	}
	return &textGen{req: req, m: m, dec: m.Tok.NewDecoder(), stops: stopMatcher{stops: stops}}
}

// request is the engine's request for the text request.
func (g *textGen) request() engine.Request {
	r := g.req
	er := engine.Request{Prompt: r.Prompt, MaxTokens: r.MaxTokens, Sampler: r.Sampler, Stop: g.m.Tok.IsEOG}
	if r.IgnoreEOS {
		er.Stop = nil
	}
	if r.Logprobs {
		er.TopLogprobs = r.TopLogprobs
		er.OnLogprob = func(lp engine.Logprob) {
			g.pending, g.all = append(g.pending, lp), append(g.all, lp)
		}
	}
	if r.OnRound != nil {
		er.OnRound = func(rd engine.Round) { r.OnRound(rd, g.texts[len(g.texts)-len(rd.Tokens):]) }
	}
	return er
}

// emit decodes a token and hands on the text it makes final.
func (g *textGen) emit(tok int) error {
	g.tokens = append(g.tokens, tok)
	piece := ""
	// A control token (BOS, a chat marker) is markup, not text: llama.cpp
	// renders it as nothing unless asked to, and so do we.
	if !g.m.Tok.IsControl(tok) {
		piece = g.dec.Add(tok)
	}
	out, stop := g.stops.add(piece)
	// A round's texts are what its tokens made final, so that no part of
	// a stop string (an end-of-generation text) reaches OnRound either;
	// the token that completes one is in no round, and its text only in
	// the result.
	if g.req.OnRound != nil && !stop {
		g.texts = append(g.texts, out)
	}
	if err := g.send(out); err != nil {
		return err
	}
	if stop {
		g.stopped = true
		return errStopString
	}
	return nil
}

// finish hands on the text held back once generation has ended: the end
// of a character, and a tail that can no longer become a stop string.
func (g *textGen) finish() error {
	if g.stopped {
		return nil
	}
	out, stop := g.stops.add(g.dec.Flush())
	if stop {
		g.stopped = true
	} else {
		out += g.stops.flush()
	}
	return g.send(out)
}

// send hands text out with the tokens since the last piece; tokens
// without text wait for the next.
func (g *textGen) send(text string) error {
	if text == "" {
		return nil
	}
	g.text.WriteString(text)
	p := Piece{Text: text, Tokens: g.tokens[g.since:], Logprobs: g.pending}
	g.since, g.pending = len(g.tokens), nil
	if g.req.OnText == nil {
		return nil
	}
	return g.req.OnText(p)
}
