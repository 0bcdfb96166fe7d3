package server

import (
	"net"
	"net/http"
)

// gate refuses, before anything else is done for it, a request that a web
// page made and may not: one for a host name this server does not answer
// to (hostPolicy), or one from a page whose origin is not allowed
// (corsPolicy). Clients that are no browser send no Origin and the name
// they connected to, and pass.
func (s *Server) gate(r *http.Request) *apiError {
	if !s.anyHost.Load() && !s.hosts.allows(r.Host) {
		e := invalid("", "forbidden_host", "Requests for the host '%s' are refused: this server answers to loopback names and addresses, "+
			"and to others only as allowed (serve --allow-host), against DNS rebinding.", hostName(r.Host))
		e.Status = http.StatusForbidden
		return e
	}
	if origin := r.Header.Get("Origin"); origin != "" && !s.cors.allows(origin) {
		e := invalid("", "forbidden_origin", "Requests from pages of the origin '%s' are refused; serve --cors-origin allows an origin.", origin)
		e.Status = http.StatusForbidden
		return e
	}
	return nil
}

// answersAnyHost reports a listener on an address other than loopback:
// there the server is meant to be reached by whatever names the network
// gives it, and answers to every Host, as ollama does (the Origin check
// and the API key still hold).
func answersAnyHost(ln net.Listener) bool {
	a, ok := ln.Addr().(*net.TCPAddr)
	return ok && !a.IP.IsLoopback()
}
