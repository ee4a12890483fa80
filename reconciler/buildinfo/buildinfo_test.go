package buildinfo

import (
	"encoding/json"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFillFromBuildInfo(t *testing.T) {
	stamped := &debug.BuildInfo{
		Main: debug.Module{Version: "v1.2.3"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123abc"},
			{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	tests := []struct {
		name string
		in   Info
		bi   *debug.BuildInfo
		want Info
	}{
		{
			name: "defaults take what the toolchain stamped",
			in:   Info{Version: DefaultVersion, Commit: DefaultCommit, BuildDate: DefaultDate},
			bi:   stamped,
			want: Info{Version: "v1.2.3", Commit: "0123abc-dirty", BuildDate: "2026-01-02T03:04:05Z"},
		},
		{
			name: "ldflags win",
			in:   Info{Version: "v9.9.9", Commit: "fedcba9", BuildDate: "2030-01-01T00:00:00Z"},
			bi:   stamped,
			want: Info{Version: "v9.9.9", Commit: "fedcba9", BuildDate: "2030-01-01T00:00:00Z"},
		},
		{
			name: "devel build without VCS keeps defaults",
			in:   Info{Version: DefaultVersion, Commit: DefaultCommit, BuildDate: DefaultDate},
			bi:   &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			want: Info{Version: DefaultVersion, Commit: DefaultCommit, BuildDate: DefaultDate},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in
			fillFromBuildInfo(&got, tt.bi)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("fillFromBuildInfo() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGet(t *testing.T) {
	got := Get()
	if got.GoVersion != runtime.Version() || got.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("Get() = %+v, want Go version %s and platform %s/%s", got, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}
	if got.Version == "" || got.Commit == "" || got.BuildDate == "" {
		t.Errorf("Get() = %+v, want no empty field", got)
	}
}

func TestInfoJSON(t *testing.T) {
	b, err := json.Marshal(Info{Version: "v1", Commit: "c", BuildDate: "d", GoVersion: "go", Platform: "p"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":"v1","commit":"c","buildDate":"d","goVersion":"go","platform":"p"}`
	if diff := cmp.Diff(want, string(b)); diff != "" {
		t.Errorf("JSON mismatch (-want +got):\n%s", diff)
	}
}

func TestInfoString(t *testing.T) {
	got := Info{Version: "v1.2.3", Commit: "0123abc", BuildDate: "2026-01-02T03:04:05Z", GoVersion: "go1.26.8", Platform: "linux/amd64"}.String()
	want := "v1.2.3 (commit 0123abc, built 2026-01-02T03:04:05Z, go1.26.8, linux/amd64)"
	if got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
