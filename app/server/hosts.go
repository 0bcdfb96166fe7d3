package server

import (
	"fmt"
	"net"
	"strings"
)

// hostPolicy is the Host header names the API answers to. A page of any
// web site can point its own name at 127.0.0.1 (DNS rebinding) and then
// call a loopback server as its own origin, Origin and all; the Host
// header still carries the site's name, and is refused (ollama's fix for
// CVE-2024-28224). Loopback names and addresses are always answered:
// browsers resolve *.localhost to loopback themselves, so no site can
// rebind them.
type hostPolicy struct {
	any   bool
	names map[string]bool
}

// newHosts allows the loopback names and addresses and these: host names
// or addresses, with or without a port, or "*" for any ("" adds none).
func newHosts(allowed []string) (hostPolicy, error) {
	h := hostPolicy{names: map[string]bool{}}
	for _, a := range allowed {
		a = strings.TrimSpace(a)
		switch a {
		case "*":
			h.any = true
			continue
		case "": // the host of ":11435", every interface's
			continue
		}
		name := hostName(a)
		if name == "" || strings.ContainsAny(a, "/?#@* ") || strings.ContainsAny(name, "[]") {
			return h, fmt.Errorf("allowed host %q: want a host name or address (such as mybox.lan or 192.168.1.5), or *", a)
		}
		h.names[name] = true
	}
	return h, nil
}

// allows reports whether a request for host (a Host header) is answered.
// HTTP/1.0 requests may carry none; browsers always send one.
func (h hostPolicy) allows(host string) bool {
	name := hostName(host)
	if h.any || host == "" || name == "localhost" || strings.HasSuffix(name, ".localhost") || h.names[name] {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}

// hostName is a Host header's name: lower case, without the port, the
// brackets of an IPv6 address or a trailing dot.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.TrimSuffix(strings.ToLower(host), ".")
}
