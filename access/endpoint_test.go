package access

import (
	"context"
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

func eps(pairs ...string) []v1alpha1.ServerAddressByClientCIDR {
	var out []v1alpha1.ServerAddressByClientCIDR
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, v1alpha1.ServerAddressByClientCIDR{ClientCIDR: pairs[i], ServerAddress: pairs[i+1]})
	}
	return out
}

func TestSelectEndpoint(t *testing.T) {
	overlapping := eps(
		"0.0.0.0/0", "public.example.com",
		"10.0.0.0/8", "corp.example.com",
		"10.20.0.0/16", "dc-b.example.com",
		"2001:db8::/32", "v6.example.com",
		"2001:db8:1::/48", "v6-site1.example.com",
	)
	tests := []struct {
		name      string
		endpoints []v1alpha1.ServerAddressByClientCIDR
		client    string
		want      string // server address, or "" for no match
	}{
		{"IPv4 longest prefix wins", overlapping, "10.20.3.4", "dc-b.example.com"},
		{"IPv4 shorter prefix", overlapping, "10.1.2.3", "corp.example.com"},
		{"IPv4 falls back to /0", overlapping, "192.0.2.7", "public.example.com"},
		{"IPv4-mapped IPv6 matched as IPv4", overlapping, "::ffff:10.20.0.1", "dc-b.example.com"},
		{"IPv6 longest prefix wins", overlapping, "2001:db8:1::9", "v6-site1.example.com"},
		{"IPv6 shorter prefix", overlapping, "2001:db8:2::9", "v6.example.com"},
		{"IPv6 outside every v6 prefix takes the /0", overlapping, "2001:db9::1", "public.example.com"},
		{"::/0 matches all, IPv4 too", eps("::/0", "any.example.com"), "203.0.113.1", "any.example.com"},
		{"equal prefixes: first listed wins", eps("0.0.0.0/0", "first", "::/0", "second"), "10.0.0.1", "first"},
		{"order of listing does not beat length", eps("10.0.0.0/8", "wide", "10.0.0.0/24", "narrow"), "10.0.0.5", "narrow"},
		{"no match", eps("10.0.0.0/8", "corp", "2001:db8::/32", "v6"), "192.0.2.1", ""},
		{"no endpoints", nil, "192.0.2.1", ""},
		{"malformed entry skipped", eps("10.0.0/8", "bad", "0.0.0.0/0", "good"), "10.0.0.1", "good"},
		{"only malformed", eps("not-a-cidr", "bad"), "10.0.0.1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SelectEndpoint(tt.endpoints, netip.MustParseAddr(tt.client))
			if tt.want == "" {
				var noEndpoint *NoEndpointError
				if !errors.As(err, &noEndpoint) {
					t.Fatalf("got %v, %v; want a NoEndpointError", got, err)
				}
				for _, ep := range tt.endpoints {
					if !strings.Contains(err.Error(), ep.ClientCIDR) {
						t.Errorf("error %q does not list tried CIDR %s", err, ep.ClientCIDR)
					}
				}
				return
			}
			if err != nil || got.ServerAddress != tt.want {
				t.Errorf("got %q, %v; want %q", got.ServerAddress, err, tt.want)
			}
		})
	}
}

// Without a stated client IP, the entry chosen is the one whose CIDR holds the local address the
// OS would use toward that entry's own server.
func TestSelectEndpointByRoute(t *testing.T) {
	routes := map[string]string{ // server host -> local address toward it
		"10.20.0.10":      "10.20.5.5",
		"corp.internal":   "10.1.1.1",
		"2001:db8::10":    "2001:db8::5",
		"vpn.example.com": "172.16.0.2",
	}
	local := func(_ context.Context, server *url.URL) (netip.Addr, error) {
		a, ok := routes[server.Hostname()]
		if !ok {
			return netip.Addr{}, errors.New("no such host")
		}
		return netip.MustParseAddr(a), nil
	}
	tests := []struct {
		name      string
		endpoints []v1alpha1.ServerAddressByClientCIDR
		want      string
	}{
		{"inside the corporate network", eps("0.0.0.0/0", "public.example.com", "10.0.0.0/8", "10.20.0.10:6443"), "10.20.0.10:6443"},
		{"route leaves by another network", eps("0.0.0.0/0", "public.example.com", "192.168.0.0/16", "vpn.example.com"), "public.example.com"},
		{"unresolvable candidate skipped", eps("10.0.0.0/8", "gone.internal", "10.1.0.0/16", "corp.internal"), "corp.internal"},
		{"IPv6", eps("2001:db8::/64", "[2001:db8::10]:6443"), "[2001:db8::10]:6443"},
		{"/0 needs no lookup", eps("0.0.0.0/0", "does-not-resolve.invalid"), "does-not-resolve.invalid"},
		{"nothing matches", eps("192.168.0.0/16", "vpn.example.com", "10.0.0.0/8", "gone.internal"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := selectEndpointByRoute(context.Background(), tt.endpoints, local)
			if tt.want == "" {
				if err == nil || !strings.Contains(err.Error(), "local address toward vpn.example.com:443 is 172.16.0.2") {
					t.Errorf("got %v, %v; want an error that says what was tried", got, err)
				}
				return
			}
			if err != nil || got.ServerAddress != tt.want {
				t.Errorf("got %q, %v; want %q", got.ServerAddress, err, tt.want)
			}
		})
	}
}

func TestRouteLocalAddrLoopback(t *testing.T) {
	got, err := routeLocalAddr(context.Background(), &url.URL{Host: "127.0.0.1:443"})
	if err != nil || !got.IsLoopback() {
		t.Errorf("local address toward 127.0.0.1: %v, %v", got, err)
	}
}

func TestServerURL(t *testing.T) {
	for in, want := range map[string]string{
		"api.example.com":                       "https://api.example.com:443",
		"api.example.com:6443":                  "https://api.example.com:6443",
		"https://api.example.com":               "https://api.example.com:443",
		"https://api.example.com:443/":          "https://api.example.com:443",
		"https://rancher.example.com/k8s/c-abc": "https://rancher.example.com:443/k8s/c-abc",
		"10.0.0.1":                              "https://10.0.0.1:443",
		"[2001:db8::1]:6443":                    "https://[2001:db8::1]:6443",
		"https://[2001:db8::1]":                 "https://[2001:db8::1]:443",
	} {
		got, err := ServerURL(in)
		if err != nil || got.String() != want {
			t.Errorf("ServerURL(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	const secret = "hunter2-xyzzy"
	for _, in := range []string{
		"http://api.example.com",
		"https://admin:" + secret + "@api.example.com",
		"https://api.example.com/?token=" + secret,
		"https://api.example.com/#" + secret,
		"https://",
		"ftp://x",
		"%zz" + secret,
	} {
		_, err := ServerURL(in)
		if err == nil {
			t.Errorf("ServerURL(%q) accepted it", in)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("ServerURL error repeats the input: %v", err)
		}
	}
}

// FuzzServerURL: whatever the input, ServerURL does not panic, what it accepts is https with an
// explicit port and no user info, and its errors never repeat the input.
func FuzzServerURL(f *testing.F) {
	for _, s := range []string{"api.example.com", "https://a:b@c", "[::1]:6443", "https://h/p?q", "http://x", "%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		u, err := ServerURL(in)
		if err != nil {
			if len(in) >= 4 && strings.Contains(err.Error(), in) {
				t.Fatalf("error repeats the input: %v", err)
			}
			return
		}
		if u.Scheme != "https" || u.Port() == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			t.Fatalf("ServerURL(%q) = %s", in, u)
		}
		again, err := ServerURL(u.String())
		if err != nil || again.String() != u.String() {
			t.Fatalf("not idempotent: %q -> %s -> %v, %v", in, u, again, err)
		}
	})
}

func TestParseArgsAndEnv(t *testing.T) {
	args, err := parseArgs(`["get-token", "--cluster", "a b"]`)
	if err != nil || strings.Join(args, "|") != "get-token|--cluster|a b" {
		t.Errorf("JSON args: %q %v", args, err)
	}
	if args, _ = parseArgs(" get-token  --cluster x "); strings.Join(args, "|") != "get-token|--cluster|x" {
		t.Errorf("word args: %q", args)
	}
	if _, err := parseArgs(`["unterminated`); err == nil {
		t.Error("bad JSON args accepted")
	}
	env, err := parseEnv(`{"B":"2","A":"1"}`)
	if err != nil || len(env) != 2 || env[0].Name != "A" || env[1].Value != "2" {
		t.Errorf("JSON env: %+v %v", env, err)
	}
	if env, _ = parseEnv("A=1 B=x=y"); len(env) != 2 || env[1].Value != "x=y" {
		t.Errorf("word env: %+v", env)
	}
	if _, err := parseEnv("A=1 sekrit-value"); err == nil || strings.Contains(err.Error(), "sekrit") {
		t.Errorf("bad env word: %v", err)
	}
}

// FuzzProviderConfig: the parsers of exec config never panic and never repeat input in errors.
func FuzzProviderConfig(f *testing.F) {
	for _, s := range []string{`["a","b"]`, "a b c", `{"A":"1"}`, "A=1 B=2", "[", "{", "=x", "A"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if _, err := parseArgs(in); err != nil && len(in) >= 4 && strings.Contains(err.Error(), in) {
			t.Fatalf("parseArgs error repeats input: %v", err)
		}
		env, err := parseEnv(in)
		if err != nil {
			if len(in) >= 4 && strings.Contains(err.Error(), in) {
				t.Fatalf("parseEnv error repeats input: %v", err)
			}
			return
		}
		for _, e := range env {
			if e.Name == "" {
				t.Fatalf("parseEnv(%q) gave an empty name", in)
			}
		}
	})
}

// FuzzSelectEndpoint: any clientCIDRs and client address; no panic, and a chosen entry holds the
// address or matches everyone (/0), and no longer valid prefix that holds it was passed over.
func FuzzSelectEndpoint(f *testing.F) {
	f.Add("10.0.0.0/8", "0.0.0.0/0", "2001:db8::/32", "10.1.2.3")
	f.Add("::/0", "10.0.0.0/24", "bad", "::ffff:10.0.0.1")
	f.Fuzz(func(t *testing.T, a, b, c, ip string) {
		client, err := netip.ParseAddr(ip)
		if err != nil {
			return
		}
		endpoints := eps(a, "a.example.com", b, "b.example.com", c, "c.example.com")
		got, err := SelectEndpoint(endpoints, client)
		if err != nil {
			return
		}
		chosen := netip.MustParsePrefix(got.ClientCIDR).Masked()
		if chosen.Bits() != 0 && !chosen.Contains(client.Unmap()) {
			t.Fatalf("chose %s for %s", chosen, client)
		}
		for _, ep := range endpoints {
			if p, err := netip.ParsePrefix(ep.ClientCIDR); err == nil && p.Masked().Contains(client.Unmap()) && p.Bits() > chosen.Bits() {
				t.Fatalf("chose %s for %s over the longer %s", chosen, client, p)
			}
		}
	})
}
