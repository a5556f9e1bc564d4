package main

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cluster-registry/sdk/trustflags"
)

// commandTable is the table of subcommands in docs/command.md: each row's first cell names a
// subcommand (`get placements [NAME...]`), the rest says what it does and which flags it takes.
func commandTable(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/command.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "## The `clusterregistry` command")
	if !ok {
		t.Fatal("docs/command.md has no section on the command")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	rows := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.SplitN(line, "|", 3)
		rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = cells[2]
	}
	return rows
}

// namedFlag is a flag as the docs write it: `--name`, `--name=...`, `-o yaml`.
var namedFlag = regexp.MustCompile("`(--?[a-zA-Z][a-z0-9-]*)")

// printFlags are cli-runtime's PrintFlags, documented together as -o and kubectl's formats.
var printFlags = []string{"output", "template", "allow-missing-template-keys", "show-managed-fields"}

// Every subcommand (get releases and describe release too) has a row in docs/command.md's
// table; every flag a row names is one its subcommand takes, as --help lists it; and every flag
// --help lists is in the row (print flags as -o, the trust flags as "the trust flags"). The
// table had no row for get releases or describe release, and named neither the releases
// controller nor its --chart-* flags, while --help did.
func TestDocsNameWhatHelpDoes(t *testing.T) {
	root := newRoot(context.Background())
	docs := map[*cobra.Command]string{}
	for first, text := range commandTable(t) {
		cmd, _, err := root.Find(strings.Fields(first))
		if err != nil || cmd == root {
			t.Errorf("docs/command.md documents %q, which is no subcommand: %v", first, err)
			continue
		}
		docs[cmd] += first + " " + text
		for _, m := range namedFlag.FindAllStringSubmatch(first+" "+text, -1) {
			if !takesFlag(cmd, m[1]) && !isTrustFlag(m[1]) {
				t.Errorf("docs/command.md: the row %q names %s, which `%s --help` does not list", first, m[1], cmd.CommandPath())
			}
		}
	}
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			checkDocumented(t, sub, docs[sub])
			walk(sub)
		}
	}
	walk(root)
	listed := regexp.MustCompile("`--controllers ([a-z,]+)`").FindStringSubmatch(docs[mustFind(t, root, "controllers")])
	for _, name := range allControllers {
		if listed == nil || !contains(strings.Split(listed[1], ","), name) {
			t.Errorf("docs/command.md: the controllers row's --controllers does not name the %s controller", name)
		}
	}
}

// checkDocumented: cmd has a row, and every flag of its own is in it.
func checkDocumented(t *testing.T, cmd *cobra.Command, text string) {
	t.Helper()
	if text == "" {
		t.Errorf("docs/command.md has no row for `%s`", cmd.CommandPath())
		return
	}
	cmd.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
		switch {
		case f.Hidden || f.Name == "help":
		case mentions(text, "--"+f.Name) || (f.Shorthand != "" && mentions(text, "-"+f.Shorthand)):
		case contains(printFlags, f.Name) && mentions(text, "-o"):
		case isTrustFlag("--"+f.Name) && strings.Contains(text, "trust flags"):
		default:
			t.Errorf("docs/command.md: `%s --%s` is in --help but not in its row", cmd.CommandPath(), f.Name)
		}
	})
}

func mentions(text, flag string) bool {
	return regexp.MustCompile("`"+regexp.QuoteMeta(flag)+"([`=/ ]|$)").MatchString(text) ||
		regexp.MustCompile("[(`,\\[ ]"+regexp.QuoteMeta(flag)+"[`=/ ,)]").MatchString(text)
}

func takesFlag(cmd *cobra.Command, flag string) bool {
	if name, ok := strings.CutPrefix(flag, "--"); ok {
		return cmd.Flags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil
	}
	short := strings.TrimPrefix(flag, "-")
	return len(short) == 1 && (cmd.Flags().ShorthandLookup(short) != nil || cmd.InheritedFlags().ShorthandLookup(short) != nil)
}

// isTrustFlag: a row may name the trust flags a reader needs (join prints them).
func isTrustFlag(flag string) bool { return contains(trustflags.Names, strings.TrimPrefix(flag, "--")) }

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func mustFind(t *testing.T, root *cobra.Command, path ...string) *cobra.Command {
	cmd, _, err := root.Find(path)
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}
