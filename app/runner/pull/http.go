package pull

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Retries: a request that is rate limited (429), meets a server's
// passing failure (5xx), times out or loses its connection is tried again
// after a growing wait, maxTries times in all.
var (
	maxTries      = 5
	retryBase     = time.Second
	maxRetryWait  = 30 * time.Second
	maxRetryAfter = 2 * time.Minute // a 429 asking for longer than this is reported, not waited on
)

// defaultClient has timeouts for connecting and for a response's headers,
// and none for the whole request: a model's file takes as long as it
// takes. A body that stops is caught by the download's stall timer.
func defaultClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   20 * time.Second,
		ResponseHeaderTimeout: time.Minute,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}}
}

// fetcher makes a pull's requests: the bearer token for its host, one
// clear error for each way a request fails, and retries.
type fetcher struct {
	client *http.Client
	name   string // the model, for errors
	host   string // the registry's host: its token goes there only
	token  string // "Bearer …" value, "" for none
	hf     bool
}

// StatusError is a request the server refused.
type StatusError struct {
	Name   string // the model
	URL    string
	Code   int
	Detail string // the server's own words, one line
	HF     bool
	Tries  int
}

func (e *StatusError) Error() string {
	where := e.URL
	var why string
	switch e.Code {
	case http.StatusUnauthorized:
		why = "not authorized (401)"
		if e.HF {
			why += ": set HF_TOKEN to a Hugging Face token that can read this repository"
		} else {
			why += ": this registry wants a login"
		}
	case http.StatusForbidden:
		why = "access refused (403)"
		if e.HF {
			why += ": a gated repository: accept its terms on huggingface.co, and set HF_TOKEN"
		}
	case http.StatusNotFound:
		why = "not found (404)"
	case http.StatusTooManyRequests:
		why = fmt.Sprintf("rate limited (429), %d tries: wait a while and pull again", e.Tries)
	default:
		why = fmt.Sprintf("the server answered %d %s", e.Code, http.StatusText(e.Code))
	}
	if e.Detail != "" {
		why += " (" + e.Detail + ")"
	}
	return fmt.Sprintf("%s: %s at %s", e.Name, why, where)
}

// Is makes a 404 an ErrNotFound.
func (e *StatusError) Is(target error) bool {
	return target == ErrNotFound && e.Code == http.StatusNotFound
}

// NetError is a request that could not be made, after its retries.
type NetError struct {
	Name, Host string
	Tries      int
	Err        error
}

func (e *NetError) Error() string {
	what := "could not reach"
	var ne net.Error
	if errors.As(e.Err, &ne) && ne.Timeout() || errors.Is(e.Err, errStalled) {
		what = "timed out talking to"
	}
	tries := fmt.Sprintf("%d tries", e.Tries)
	if e.Tries == 1 {
		tries = "1 try"
	}
	return fmt.Sprintf("%s: %s %s (%s): %v", e.Name, what, e.Host, tries, e.Err)
}

func (e *NetError) Unwrap() error { return e.Err }

// do sends a request until it is answered with something other than a
// passing failure. A 2xx or 3xx response is returned for the caller to
// read; anything else is an error (a *StatusError, a *NetError, or the
// context's).
func (f *fetcher) do(ctx context.Context, method, url string, hdr http.Header) (*http.Response, error) {
	challenged := false
	for try := 1; ; try++ {
		resp, err := f.send(ctx, method, url, hdr)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if !retryable(err) || try >= maxTries {
				return nil, &NetError{Name: f.name, Host: hostOf(url), Tries: try, Err: err}
			}
			if err := sleep(ctx, backoff(try)); err != nil {
				return nil, err
			}
			continue
		}
		if resp.StatusCode < 400 {
			return resp, nil
		}
		detail := errorDetail(resp)
		switch {
		case resp.StatusCode == http.StatusUnauthorized && !challenged && f.token == "":
			// A registry that hands anonymous tokens (docker's distribution
			// protocol) says where in WWW-Authenticate; try it once.
			challenged = true
			if tok, ok := f.anonymousToken(ctx, resp.Header.Get("WWW-Authenticate")); ok {
				f.token, try = "Bearer "+tok, try-1
				continue
			}
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
			wait, ok := retryAfter(resp.Header.Get("Retry-After"), try)
			if ok && try < maxTries {
				if err := sleep(ctx, wait); err != nil {
					return nil, err
				}
				continue
			}
		}
		return nil, &StatusError{Name: f.name, URL: url, Code: resp.StatusCode, Detail: detail, HF: f.hf, Tries: try}
	}
}

// newFetcher is a fetcher whose client keeps the token to the
// registry's host: a redirect elsewhere (the storage host, even on the
// same machine at another port) goes without it.
func newFetcher(c *http.Client, name, baseURL string, hf bool, token string) *fetcher {
	f := &fetcher{name: name, host: hostOf(baseURL), hf: hf, token: token}
	cc := *c
	next := c.CheckRedirect
	cc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !strings.EqualFold(req.URL.Host, f.host) {
			req.Header.Del("Authorization")
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	f.client = &cc
	return f
}

func (f *fetcher) send(ctx context.Context, method, url string, hdr http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", "dovetail")
	// The token goes to the registry's own host; Go's client drops it
	// when a redirect leads to another (the storage host).
	if f.token != "" && strings.EqualFold(req.URL.Host, f.host) {
		req.Header.Set("Authorization", f.token)
	}
	return f.client.Do(req)
}

// errorDetail is the server's message, one short line: a registry's
// {"errors":[{"message":…}]}, Hugging Face's {"error":…}, or the text.
func errorDetail(resp *http.Response) string {
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var j struct {
		Errors []struct{ Code, Message string }
		Error  string
	}
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &j) == nil {
		switch {
		case len(j.Errors) > 0:
			msg = j.Errors[0].Message
		case j.Error != "":
			msg = j.Error
		default:
			msg = ""
		}
	}
	if strings.HasPrefix(msg, "<") { // an HTML error page says nothing a line can
		msg = ""
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	return msg
}

// retryable reports whether a failed request may succeed if tried again:
// not when the host does not exist or its certificate is wrong.
func retryable(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		return false
	}
	var cert *x509.UnknownAuthorityError
	var host x509.HostnameError
	var inv x509.CertificateInvalidError
	return !errors.As(err, &cert) && !errors.As(err, &host) && !errors.As(err, &inv)
}

// backoff is the wait before try+1: doubling from retryBase, with jitter
// so that many clients do not come back at once.
func backoff(try int) time.Duration {
	d := min(retryBase<<(try-1), maxRetryWait)
	return time.Duration(float64(d) * (0.75 + rand.Float64()/2))
}

// retryAfter is how long a 429 or 5xx asks to be waited on: its
// Retry-After (seconds or a date), else the backoff. ok is false when it
// asks for longer than maxRetryAfter.
func retryAfter(h string, try int) (time.Duration, bool) {
	h = strings.TrimSpace(h)
	if h == "" {
		return backoff(try), true
	}
	var d time.Duration
	if s, err := strconv.Atoi(h); err == nil {
		d = time.Duration(max(s, 0)) * time.Second
	} else if t, err := http.ParseTime(h); err == nil {
		d = max(time.Until(t), 0)
	} else {
		return backoff(try), true
	}
	return d, d <= maxRetryAfter
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func hostOf(u string) string {
	if p, err := url.Parse(u); err == nil && p.Host != "" {
		return p.Host
	}
	return u
}
