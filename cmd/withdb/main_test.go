package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestThrowawayClusterStartsAnswersAndIsRemoved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "helpdesk-pg-*"))
	binDir, err := findServerBinaries()
	if err != nil {
		t.Fatalf("this test needs PostgreSQL's server binaries: %v", err)
	}
	url, stop, err := startCluster(ctx, binDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := ping(ctx, url); err != nil {
		stop()
		t.Fatalf("the throwaway cluster at %s does not answer: %v", url, err)
	}
	named, err := ensureDatabase(ctx, url, "helpdesk_test")
	if err != nil || !strings.Contains(named, "/helpdesk_test") || ping(ctx, named) != nil {
		t.Errorf("ensureDatabase: %s, %v", named, err)
	}
	stop()
	if err := ping(ctx, url); err == nil {
		t.Error("the cluster still answers after stop")
	}
	if after, _ := filepath.Glob(filepath.Join(os.TempDir(), "helpdesk-pg-*")); len(after) > len(before) {
		t.Errorf("the cluster's folder was not removed: %v", after)
	}
}

// Not parallel: it sets DATABASE_URL for findDatabase.
func TestNoPasswordInItsOutput(t *testing.T) {
	for _, pw := range []string{"S3cretPw%zz", "S3cret#Pw", "S3cret@Pw", "S3cret%40Pw"} {
		u := "postgres://helpdesk:" + pw + "@127.0.0.1:1/x"
		t.Setenv("DATABASE_URL", u)
		var out bytes.Buffer
		if code := run("", false, []string{"true"}, scrubbed(&out, os.Getenv)); code == 0 {
			t.Errorf("%s: exit 0 with a database that does not answer", u)
		}
		if strings.Contains(out.String(), "S3cret") || !strings.Contains(out.String(), "DATABASE_URL") {
			t.Errorf("%s: %q", u, out.String())
		}
	}
}
