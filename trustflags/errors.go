package trustflags

import (
	"regexp"
	"strings"
)

// The Resolver's errors name the options to set in Go's terms (ResolverOptions.FileRoots, ...).
// A command's user sets flags, so its errors should name those.
var optionFlags = []struct {
	option *regexp.Regexp
	flag   string
}{
	{regexp.MustCompile(`ResolverOptions\.ExecPlugins\[\d+\]\.SendTo`), "--" + FlagSendTo},
	{regexp.MustCompile(`ResolverOptions\.FileRoots\[\d+\]\.SendTo`), "--" + FlagSendTo},
	{regexp.MustCompile(`ResolverOptions\.ExecPlugins\[\d+\]\.ArgsPattern`), "--" + FlagAllowExecArgs + "'s pattern"},
	{regexp.MustCompile(`ResolverOptions\.ExecPlugins\[\d+\]\.Args`), "the arguments that --" + FlagAllowExecArgs + " gives"},
	{regexp.MustCompile(`ResolverOptions\.ExecPlugins\[\d+\]\.ClusterEnv`), "the variables a Cluster may set (none, with these flags)"},
	{regexp.MustCompile(`ResolverOptions\.ExecPlugins`), "--" + FlagAllowExec + " or --" + FlagAllowExecArgs},
	{regexp.MustCompile(`ResolverOptions\.FileRoots`), "--" + FlagFileRoot},
	{regexp.MustCompile(`ResolverOptions\.Prefer`), "--" + FlagPrefer},
	{regexp.MustCompile(`add an ExecPlugin for it to run it`), "allow the command to run it"},
}

// InFlagTerms returns err with its text in the flags' terms: where the Resolver's errors name an
// option (ResolverOptions.FileRoots, ResolverOptions.ExecPlugins[0].SendTo), the flag that sets
// it (--file-root, --send-to). errors.Is and errors.As see the original error.
func InFlagTerms(err error) error {
	if err == nil {
		return nil
	}
	text := err.Error()
	if !strings.Contains(text, "ResolverOptions.") {
		return err
	}
	for _, o := range optionFlags {
		text = o.option.ReplaceAllString(text, o.flag)
	}
	return &flagTermsError{text: text, err: err}
}

type flagTermsError struct {
	text string
	err  error
}

func (e *flagTermsError) Error() string { return e.text }
func (e *flagTermsError) Unwrap() error { return e.err }
