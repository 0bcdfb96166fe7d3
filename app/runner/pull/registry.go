package pull

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// The media types of an ollama manifest and its layers.
const (
	manifestType = "application/vnd.docker.distribution.manifest.v2+json"
	modelLayer   = "application/vnd.ollama.image.model"
	paramsLayer  = "application/vnd.ollama.image.params"
)

// manifest is an ollama (docker v2) manifest.
type manifest struct {
	SchemaVersion int     `json:"schemaVersion"`
	MediaType     string  `json:"mediaType,omitempty"`
	Config        *layer  `json:"config,omitempty"`
	Layers        []layer `json:"layers"`
}

type layer struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

// hex is the layer's SHA-256 in hex, "" when its digest is not one (a
// digest names a file: nothing else may pass).
func (l layer) hex() string {
	h, ok := strings.CutPrefix(l.Digest, "sha256:")
	if !ok || len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
		return ""
	}
	return h
}

// find is the manifest's first layer of a media type.
func (m manifest) find(mediaType string) (layer, bool) {
	for _, l := range m.Layers {
		if l.MediaType == mediaType {
			return l, true
		}
	}
	return layer{}, false
}

// base is the registry's address for a name: Hugging Face's
// ($HF_ENDPOINT, else https://huggingface.co, which answers ollama's
// registry protocol for GGUF repositories at /v2/ORG/REPO/manifests/QUANT), ollama's ($DOVETAIL_REGISTRY, else
// https://registry.ollama.ai), or the host the name gives (http:// with
// insecure).
func base(r Ref, o Options) string {
	switch {
	case r.HF():
		if e := strings.TrimRight(o.Env("HF_ENDPOINT"), "/"); e != "" {
			return e
		}
		return "https://huggingface.co" // hf.co's own name: no redirect on each request
	case r.Host == ollamaHost:
		if e := strings.TrimRight(o.Env("DOVETAIL_REGISTRY"), "/"); e != "" {
			return e
		}
	}
	if o.Insecure {
		return "http://" + r.Host
	}
	return "https://" + r.Host
}

// repoPath is "/v2/NAMESPACE/MODEL", the registry's path for a name.
func repoPath(r Ref) string {
	return "/v2/" + url.PathEscape(r.Namespace) + "/" + url.PathEscape(r.Model)
}

// getManifest fetches a name's manifest.
func (f *fetcher) getManifest(ctx context.Context, baseURL string, r Ref) (manifest, error) {
	u := baseURL + repoPath(r) + "/manifests/" + url.PathEscape(r.Tag)
	resp, err := f.do(ctx, http.MethodGet, u, http.Header{"Accept": {manifestType}})
	if err != nil {
		return manifest{}, err
	}
	defer resp.Body.Close()
	var m manifest
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&m); err != nil {
		return manifest{}, fmt.Errorf("%s: the registry's manifest does not read: %v", f.name, err)
	}
	return m, nil
}

// anonymousToken asks a registry's token service for a token, as the
// docker distribution protocol's challenge says:
// WWW-Authenticate: Bearer realm="…",service="…",scope="…".
func (f *fetcher) anonymousToken(ctx context.Context, challenge string) (string, bool) {
	scheme, params, _ := strings.Cut(challenge, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	kv := map[string]string{}
	for _, p := range strings.Split(params, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		kv[strings.ToLower(k)] = strings.Trim(v, `"`)
	}
	realm, err := url.Parse(kv["realm"])
	if err != nil || realm.Scheme != "https" && realm.Scheme != "http" {
		return "", false
	}
	q := realm.Query()
	for _, k := range []string{"service", "scope"} {
		if kv[k] != "" {
			q.Set(k, kv[k])
		}
	}
	realm.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, realm.String(), nil)
	if err != nil {
		return "", false
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	var t struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&t) != nil {
		return "", false
	}
	tok := t.Token
	if tok == "" {
		tok = t.AccessToken
	}
	return tok, tok != ""
}
