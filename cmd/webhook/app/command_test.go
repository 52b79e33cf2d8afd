package app

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spreadguard/spreadguard/pkg/apis/spreadguard/v1alpha1"
)

// runCommand executes the command with args and a run function that records
// the configuration it is handed.
func runCommand(t *testing.T, args ...string) (got *Config, out string, err error) {
	t.Helper()
	var buf bytes.Buffer
	cmd := NewCommand(t.Context(), func(_ context.Context, cfg *Config) error {
		got = cfg
		return nil
	})
	cmd.SetArgs(args)
	cmd.SetOut(&buf)
	cmd.SetErr(&buf)
	err = cmd.Execute()
	return got, buf.String(), err
}

func TestCommandHandsTheParsedConfigToRun(t *testing.T) {
	got, _, err := runCommand(t, "--default-action", "Warn", "--port", "8443")
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	want := configWith(func(c *Config) { c.DefaultAction = v1alpha1.ActionWarn; c.Port = 8443 })
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config handed to run (-want +got):\n%s", diff)
	}
}

func TestCommandReportsEveryInvalidFlag(t *testing.T) {
	got, _, err := runCommand(t, "--port=0", "--default-action=deny", "--excluded-namespaces=Bad_NS")
	if got != nil {
		t.Errorf("run was called with an invalid configuration: %+v", got)
	}
	if err == nil {
		t.Fatal("Execute succeeded with an invalid configuration")
	}
	want := `invalid configuration:
  --port (port): Invalid value: 0: must be between 1 and 65535
  --default-action (defaultAction): Unsupported value: "deny": supported values: "Deny", "Warn", "Audit"
  --excluded-namespaces (excludedNamespaces[0]): Invalid value: "Bad_NS": `
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error:\n%s\nwant it to start with:\n%s", err, want)
	}
}

func TestCommandHelpListsEveryFlagWithoutRunning(t *testing.T) {
	got, out, err := runCommand(t, "--help")
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if got != nil {
		t.Error("run was called for --help")
	}
	for _, flag := range []string{"--config", "--kubeconfig", "--port", "--cert-dir", "--metrics-bind-address",
		"--health-probe-bind-address", "--default-action", "--excluded-namespaces", "--refuse-until-synced", "--log-level"} {
		if !strings.Contains(out, flag) {
			t.Errorf("--help does not list %s:\n%s", flag, out)
		}
	}
}

func TestCommandReturnsTheRunError(t *testing.T) {
	boom := errors.New("boom")
	cmd := NewCommand(t.Context(), func(context.Context, *Config) error { return boom })
	cmd.SetArgs(nil)
	if err := cmd.Execute(); !errors.Is(err, boom) {
		t.Errorf("Execute() = %v, want %v", err, boom)
	}
}
