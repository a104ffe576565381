package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "write docs/configuration.md anew from the settings' declarations")

// TestConfigurationReference holds docs/configuration.md to the settings
// as they are declared: a setting added, changed or removed in code and
// not in the reference fails here.
func TestConfigurationReference(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := configurationReference(&b); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "docs", "configuration.md")
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(have, b.Bytes()) {
		t.Errorf("docs/configuration.md is stale (%v): run `make docs` (go test ./cmd/helpdesk -run TestConfigurationReference -update) and commit it", err)
	}
}
