package pull

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// fileURL is where a Hugging Face repository's file is:
// BASE/ORG/REPO/resolve/main/FILE.
func fileURL(baseURL string, r Ref) string {
	var p []string
	for _, s := range strings.Split(r.File, "/") {
		p = append(p, url.PathEscape(s))
	}
	return baseURL + "/" + url.PathEscape(r.Namespace) + "/" + url.PathEscape(r.Model) + "/resolve/main/" + strings.Join(p, "/")
}

// fileManifest is a manifest for one file of a Hugging Face repository,
// from what its HEAD says, read as huggingface_hub reads it: a file kept
// in LFS answers with a redirect to the storage host whose X-Linked-Etag
// is the file's SHA-256 and X-Linked-Size its size. Redirects within the
// Hub (a renamed repository) are followed; the one to the storage host is
// not.
func (f *fetcher) fileManifest(ctx context.Context, u string) (manifest, error) {
	c := *f.client
	follow := c.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !strings.EqualFold(req.URL.Host, via[0].URL.Host) {
			return http.ErrUseLastResponse
		}
		return follow(req, via)
	}
	head := *f
	head.client = &c
	resp, err := head.do(ctx, http.MethodHead, u, nil)
	if err != nil {
		return manifest{}, err
	}
	resp.Body.Close()
	etag := resp.Header.Get("X-Linked-Etag")
	if etag == "" {
		etag = resp.Header.Get("ETag")
	}
	etag = strings.Trim(strings.TrimPrefix(strings.TrimSpace(etag), "W/"), `"`)
	size, err := strconv.ParseInt(resp.Header.Get("X-Linked-Size"), 10, 64)
	if err != nil {
		size = resp.ContentLength
	}
	l := layer{MediaType: modelLayer, Digest: "sha256:" + strings.ToLower(etag), Size: size}
	if l.hex() == "" {
		return manifest{}, fmt.Errorf("%s: Hugging Face gave no SHA-256 for the file (ETag %q): it cannot be verified, so it is not pulled", f.name, etag)
	}
	if size <= 0 {
		return manifest{}, fmt.Errorf("%s: Hugging Face gave no size for the file", f.name)
	}
	return manifest{SchemaVersion: 2, MediaType: manifestType, Layers: []layer{l}}, nil
}
