package pull

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
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
// from what its HEAD says: a GGUF file is kept in LFS, so its SHA-256 is
// there, else it cannot be verified and is not pulled.
func (f *fetcher) fileManifest(ctx context.Context, u string) (manifest, error) {
	rf, err := f.head(ctx, u)
	if err != nil {
		return manifest{}, err
	}
	if rf.sha256 == "" {
		return manifest{}, fmt.Errorf("%s: Hugging Face gave no SHA-256 for the file (ETag %q): it cannot be verified, so it is not pulled", f.name, rf.etag)
	}
	return manifest{SchemaVersion: 2, MediaType: manifestType, Layers: []layer{rf.layer()}}, nil
}

// repoFile is a file of a Hugging Face repository as its HEAD describes
// it: a file kept in LFS by its SHA-256, a small one kept in git itself
// (config.json, an index) by git's blob id, as huggingface_hub tells them.
type repoFile struct {
	url     string
	size    int64
	etag    string // as sent, for errors
	sha256  string // hex: a file in LFS
	gitSHA1 string // hex: git's blob id ("blob SIZE\0" and the bytes), a file in git
}

func (rf repoFile) layer() layer {
	return layer{MediaType: modelLayer, Digest: "sha256:" + rf.sha256, Size: rf.size}
}

// head reads a file's HEAD as huggingface_hub does: a file kept in LFS
// answers with a redirect to the storage host whose X-Linked-Etag is the
// file's SHA-256 and X-Linked-Size its size; a file in git answers itself,
// its ETag git's blob id. Redirects within the Hub (a renamed repository)
// are followed; the one to the storage host is not.
func (f *fetcher) head(ctx context.Context, u string) (repoFile, error) {
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
		return repoFile{}, err
	}
	resp.Body.Close()
	rf := repoFile{url: u}
	linked := resp.Header.Get("X-Linked-Etag")
	rf.etag = linked
	if linked == "" {
		rf.etag = resp.Header.Get("ETag")
	}
	etag := strings.ToLower(strings.Trim(strings.TrimPrefix(strings.TrimSpace(rf.etag), "W/"), `"`))
	switch {
	case isHex(etag, 64):
		rf.sha256 = etag
	case linked == "" && isHex(etag, 40):
		rf.gitSHA1 = etag
	}
	size, err := strconv.ParseInt(resp.Header.Get("X-Linked-Size"), 10, 64)
	if err != nil {
		size = resp.ContentLength
	}
	rf.size = size
	if size <= 0 {
		return repoFile{}, fmt.Errorf("%s: Hugging Face gave no size for %s", f.name, u)
	}
	return rf, nil
}

func isHex(s string, n int) bool {
	return len(s) == n && strings.Trim(s, "0123456789abcdef") == ""
}

// maxSmallFile bounds a file read whole into memory: config.json, an
// index (the Hub keeps files over 10 MB in LFS).
const maxSmallFile = 16 << 20

// getSmall downloads a small file whole and checks it against the digest
// its HEAD gave: its SHA-256, or git's blob id. A file with neither is
// not kept: nothing unverified is.
func (f *fetcher) getSmall(ctx context.Context, rf repoFile, what string) ([]byte, error) {
	if rf.sha256 == "" && rf.gitSHA1 == "" {
		return nil, fmt.Errorf("%s: Hugging Face gave no digest for %s (ETag %q): it cannot be verified, so it is not pulled", f.name, what, rf.etag)
	}
	if rf.size > maxSmallFile {
		return nil, fmt.Errorf("%s: %s is %s, more than a %s would be", f.name, what, humanBytes(rf.size), what)
	}
	resp, err := f.do(ctx, http.MethodGet, rf.url, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxSmallFile+1))
	if err != nil {
		return nil, &NetError{Name: f.name, Host: hostOf(rf.url), Tries: 1, Err: err}
	}
	want, got := "sha256:"+rf.sha256, sha256.Sum256(b)
	gotHex := hex.EncodeToString(got[:])
	if rf.sha256 == "" {
		want, gotHex = "git blob "+rf.gitSHA1, gitBlobID(b)
		if gotHex == rf.gitSHA1 {
			return b, nil
		}
	} else if gotHex == rf.sha256 {
		return b, nil
	}
	return nil, fmt.Errorf("%s: %s as downloaded is not what Hugging Face says it is (%s, got %s): not kept; pull again", f.name, what, want, gotHex)
}

// gitBlobID is git's id of a file's bytes: SHA-1 over "blob SIZE\0" and
// them.
func gitBlobID(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}
