package server

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"time"

	"dovetail/app/runner"
	"dovetail/engine"
)

// Embeddings: OpenAI's /v1/embeddings here, ollama's /api/embed and
// /api/embeddings in ollama_embed.go. A vector is the mean of the model's
// final hidden states over the input, L2-normalised (engine.Embed, held to
// llama.cpp's llama-embedding --pooling mean). They run on the slots that
// generate, waiting in the same queue.

// maxEmbedInputs is OpenAI's limit on the inputs of one request.
const maxEmbedInputs = 2048

// embedJob is a validated embedding request on its leased model.
type embedJob struct {
	lease  *runner.Lease
	inputs [][]int // each input's tokens, within the context
	dims   int     // the length asked for, 0: the model's
}

// runEmbed embeds the job's inputs in order on one slot of the leased
// model, taken as a generation takes one (a full queue is 429). It
// returns the vectors and the tokens read; on failure the error is
// answered through w and ok is false.
func (s *Server) runEmbed(w http.ResponseWriter, r *http.Request, j *embedJob) (vecs [][]float32, tokens int, ok bool) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.base, cancel)()

	wk, release, ok := s.acquire(ctx, w, j.lease.Runner())
	if !ok {
		return nil, 0, false
	}
	defer release()

	start := time.Now()
	for _, in := range j.inputs {
		v, err := wk.slot.Embed(ctx, in)
		switch {
		case err != nil && s.base.Err() != nil:
			writeError(w, errShuttingDown)
			return nil, 0, false
		case err != nil && ctx.Err() != nil:
			return nil, 0, false
		case err != nil:
			writeError(w, serverError(fmt.Errorf("the model %s: %w", j.lease.Entry().Name, err)))
			return nil, 0, false
		}
		if j.dims > 0 && j.dims < len(v) {
			// Cut, then unit length again, as ollama and OpenAI's
			// shortened embeddings do.
			v = v[:j.dims]
			if err := engine.L2Normalize(v); err != nil {
				writeError(w, serverError(err))
				return nil, 0, false
			}
		}
		vecs = append(vecs, v)
		tokens += len(in)
	}
	s.observe(engine.Stats{PromptTokens: tokens, PromptTime: time.Since(start)})
	return vecs, tokens, true
}

// checkDims reads a requested length: 1 to the model's hidden size.
func checkDims(param string, d int64, hidden int) (int, *apiError) {
	if d < 1 || d > int64(hidden) {
		return 0, invalid(param, "", "%s must be between 1 and %d (this model's embedding length), got %d.", param, hidden, d)
	}
	return int(d), nil
}

// tooLong is the 400 of an input longer than the context.
func tooLong(param string, n, ctx int) *apiError {
	return invalid(param, "context_length_exceeded", "'%s' has %d tokens; this model's context holds %d.", param, n, ctx)
}

// embeddingsRequest is OpenAI's /v1/embeddings body.
type embeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat *string         `json:"encoding_format"`
	Dimensions     *int64          `json:"dimensions"`
	User           string          `json:"user"`
}

type embeddingList struct {
	Object string          `json:"object"`
	Data   []embeddingItem `json:"data"`
	Model  string          `json:"model"`
	Usage  embeddingUsage  `json:"usage"`
}

type embeddingItem struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, or base64 of its little-endian bytes
}

type embeddingUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// handleEmbeddings answers OpenAI's /v1/embeddings.
func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	var req embeddingsRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if _, ok := s.fleet.Lookup(req.Model); !ok {
		writeError(w, s.unknownModel(req.Model))
		return
	}
	b64 := false
	if req.EncodingFormat != nil {
		switch *req.EncodingFormat {
		case "float":
		case "base64":
			b64 = true
		default:
			writeError(w, invalid("encoding_format", "", "encoding_format must be 'float' or 'base64', got '%s'.", *req.EncodingFormat))
			return
		}
	}
	if isNull(req.Input) {
		writeError(w, invalid("input", "", "Missing required parameter: 'input'."))
		return
	}
	lease, ok := s.lease(w, r, req.Model)
	if !ok {
		return
	}
	defer lease.Release(0, false)
	j := &embedJob{lease: lease}
	var e *apiError
	if j.inputs, e = openAIInputs(lease.Model(), req.Input); e != nil {
		writeError(w, e)
		return
	}
	if req.Dimensions != nil {
		if j.dims, e = checkDims("dimensions", *req.Dimensions, lease.Model().Config().Hidden); e != nil {
			writeError(w, e)
			return
		}
	}
	for i, in := range j.inputs {
		if ctx := lease.Runner().Context(); len(in) > ctx {
			writeError(w, tooLong(inputParam(req.Input, i), len(in), ctx))
			return
		}
	}
	vecs, tokens, ok := s.runEmbed(w, r, j)
	if !ok {
		return
	}
	out := embeddingList{Object: "list", Model: lease.Entry().Name, Usage: embeddingUsage{PromptTokens: tokens, TotalTokens: tokens}}
	for i, v := range vecs {
		item := embeddingItem{Object: "embedding", Index: i, Embedding: v}
		if b64 {
			item.Embedding = float32Base64(v)
		}
		out.Data = append(out.Data, item)
	}
	writeJSON(w, http.StatusOK, out)
}

// openAIInputs reads what OpenAI takes as input: a string, an array of
// strings, an array of token ids, or an array of arrays of token ids.
// Texts are tokenized as for an embedding (runner.Model.EmbedTokens);
// token ids are taken as they are.
func openAIInputs(m *runner.Model, raw json.RawMessage) ([][]int, *apiError) {
	var texts []string
	var one string
	if json.Unmarshal(raw, &one) == nil {
		texts = []string{one}
	} else if json.Unmarshal(raw, &texts) != nil {
		return tokenInputs(m.Tok.VocabSize(), raw)
	}
	if len(texts) == 0 {
		return nil, invalid("input", "", "'input' must not be an empty array.")
	}
	if len(texts) > maxEmbedInputs {
		return nil, invalid("input", "", "'input' may hold at most %d items, got %d.", maxEmbedInputs, len(texts))
	}
	var out [][]int
	for i, t := range texts {
		if t == "" {
			return nil, invalid(inputParam(raw, i), "", "'%s' cannot be an empty string.", inputParam(raw, i))
		}
		toks := m.EmbedTokens(t)
		if len(toks) == 0 {
			return nil, invalid(inputParam(raw, i), "", "'%s' has no tokens.", inputParam(raw, i))
		}
		out = append(out, toks)
	}
	return out, nil
}

// tokenInputs reads an array of token ids, or an array of such arrays.
func tokenInputs(vocab int, raw json.RawMessage) ([][]int, *apiError) {
	var ids []int
	var lists [][]int
	if json.Unmarshal(raw, &ids) == nil {
		lists = [][]int{ids}
	} else if json.Unmarshal(raw, &lists) != nil {
		return nil, invalid("input", "invalid_type", "'input' must be a string, an array of strings, an array of token ids, or an array of arrays of token ids.")
	}
	if len(lists) > maxEmbedInputs {
		return nil, invalid("input", "", "'input' may hold at most %d items, got %d.", maxEmbedInputs, len(lists))
	}
	for i, l := range lists {
		param := inputParam(raw, i)
		if len(l) == 0 {
			return nil, invalid(param, "", "'%s' must not be an empty array.", param)
		}
		for _, id := range l {
			if id < 0 || id >= vocab {
				return nil, invalid(param, "", "Token id %d in '%s' is outside the vocabulary [0, %d).", id, param, vocab)
			}
		}
	}
	return lists, nil
}

// inputParam names input i: "input" when there is one, else "input[i]".
func inputParam(raw json.RawMessage, i int) string {
	var one string
	var ids []int
	if json.Unmarshal(raw, &one) == nil || json.Unmarshal(raw, &ids) == nil {
		return "input"
	}
	return fmt.Sprintf("input[%d]", i)
}

// float32Base64 is OpenAI's base64 encoding of a vector: its float32s as
// little-endian bytes.
func float32Base64(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}
