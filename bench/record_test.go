package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func line(t *testing.T, r Record) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

func TestReadRecordsAndRepair(t *testing.T) {
	long := Record{Task: "long", Reason: strings.Repeat("x", 10000)}
	good := line(t, Record{Task: "a", Success: true}) + line(t, Record{Task: "b"})
	cases := []struct {
		name    string
		content string
		want    []string // tasks read
		after   string   // file content after repair
	}{
		{"empty", "", nil, ""},
		{"whole lines", good, []string{"a", "b"}, good},
		{"partial last line", good + `{"task":"c","succ`, []string{"a", "b"}, good},
		{"only a partial line", `{"task":"c"`, nil, ""},
		{"partial line longer than a block", good + line(t, long)[:7000], []string{"a", "b"}, good},
		{"long whole line", good + line(t, long), []string{"a", "b", "long"}, good + line(t, long)},
		{"blank lines", "\n" + good + "\n", []string{"a", "b"}, "\n" + good + "\n"},
		{"last record wins", good + line(t, Record{Task: "a", Success: false}), []string{"a", "b"}, good + line(t, Record{Task: "a"})},
	}
	for _, tc := range cases {
		path := filepath.Join(t.TempDir(), TasksFile)
		if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		recs, err := ReadRecords(path)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got []string
		for _, r := range recs {
			got = append(got, r.Task)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Fatalf("%s: read %v, want %v", tc.name, got, tc.want)
		}
		if tc.name == "last record wins" && recs[0].Success {
			t.Fatalf("%s: the first record of a was kept", tc.name)
		}
		// Appending after a repair never glues a record to a partial line.
		app, err := openAppender(path)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(path)
		if string(data) != tc.after {
			t.Fatalf("%s: after repair %q, want %q", tc.name, data, tc.after)
		}
		if err := app.Append(Record{Task: "z"}); err != nil {
			t.Fatal(err)
		}
		app.Close()
		recs, err = ReadRecords(path)
		if err != nil || len(recs) == 0 || recs[len(recs)-1].Task != "z" {
			t.Fatalf("%s: after append: %v %v", tc.name, recs, err)
		}
	}
}

func TestReadRecordsErrors(t *testing.T) {
	cases := []struct{ name, content, want string }{
		{"garbage line", line(t, Record{Task: "a"}) + "not json\n", TasksFile + ":2:"},
		{"record without task", `{"success":true}` + "\n", TasksFile + ":1: record without a task"},
	}
	for _, tc := range cases {
		path := filepath.Join(t.TempDir(), TasksFile)
		os.WriteFile(path, []byte(tc.content), 0o644)
		if _, err := ReadRecords(path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	if recs, err := ReadRecords(filepath.Join(t.TempDir(), "missing.jsonl")); err != nil || recs != nil {
		t.Errorf("missing file: %v %v", recs, err)
	}
}
