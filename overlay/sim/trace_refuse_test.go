package sim

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Each trace a reader used to take silently (or with a useless message) is
// refused with the line, the column where there is one, and what is valid.
func TestReadTraceRefuses(t *testing.T) {
	binary := "\x89PNG\r\n\x1a\n" + strings.Repeat("\x00\xff\xfe", 300)
	for _, tc := range []struct {
		name, format, in string
		want             string // the whole error
	}{
		{"a row with fewer fields than the header", "csv",
			"submit,job,budget,gpus,work,min_runtime\n0,a,x,1,10m,5m\n60,b,x,2,10m\n",
			`line 3: 5 fields, but the header names 6 columns: the row has no min_runtime (write an empty field for a default)`},
		{"a row with more fields than the header", "csv",
			"submit,job,gpus,work\n0,a,1,10m,5m\n",
			`line 2: 5 fields, but the header names only 4 columns (submit, job, gpus, work); a field that holds a comma is quoted`},
		{"a job ID twice", "csv",
			"submit,job,gpus,work\n0,a,1,10m\n60,b,1,10m\n90,a,2,10m\n",
			`line 4: job "a" is also the job of line 2; give every job its own id`},
		{"a job ID twice in JSON lines", "jsonl",
			"{\"submit\":0,\"job\":\"a\",\"gpus\":1,\"work\":600}\n\n{\"submit\":5,\"job\":\"a\",\"gpus\":1,\"work\":600}\n",
			`line 3: job "a" is also the job of line 1; give every job its own id`},
		{"no gpus column", "csv",
			"submit,job,work\n0,a,10m\n",
			`line 1: the header has no gpus column; every job row needs submit, job, gpus, work`},
		{"no gpus and work columns", "csv",
			"submit,job\n0,a\n",
			`line 1: the header has no gpus, work columns; every job row needs submit, job, gpus, work`},
		{"an empty gpus field", "csv",
			"submit,job,gpus,work\n0,a,,10m\n",
			`line 2: job "a": gpus is missing; give the GPUs of each allocation, 1 to 64`},
		{"no gpus key in JSON lines", "jsonl",
			`{"submit":0,"job":"a","work":600}`,
			`line 1: job "a": gpus is missing; give the GPUs of each allocation, 1 to 64`},
		{"a JSON key that is not a column", "jsonl",
			`{"submit":0,"job":"a","gpus":1,"work":600,"gpu_count":3}`,
			`line 1, column 43: unknown key "gpu_count"; valid keys: ` + strings.Join(traceColumns, ", ") + `, and "at" for "submit"`},
		{"a JSON key twice", "jsonl",
			`{"submit":0,"job":"a","gpus":1,"at":600}`,
			`line 1, column 32: key "at" is given twice ("at" and "submit" are the same key); give it once`},
		{"a JSON key twice in two cases", "jsonl",
			`{"submit":0,"job":"a","gpus":1,"GPUS":2,"work":600}`,
			`line 1, column 32: key "GPUS" is given twice ("at" and "submit" are the same key); give it once`},
		{"a JSON array value", "jsonl",
			`{"submit":0,"job":"a","gpus":[1,2],"work":600}`,
			`line 1, column 30: key "gpus": want a string, number, boolean or null, not an array`},
		{"broken JSON", "jsonl",
			"{\"submit\":0,\"job\":\"a\",\"gpus\":1,\"work\":600}\n{\"submit\":1 \"job\":\"b\"}\n",
			`line 2, column 13: invalid character '"' after object key:value pair`},
		{"two objects on a line", "jsonl",
			`{"submit":0,"job":"a","gpus":1,"work":600} {"submit":1}`,
			`line 1, column 44: more after the JSON object; a JSON lines trace holds one object per line`},
		{"an object not closed", "jsonl",
			`{"submit":0,"job":"a","gpus":1`,
			`line 1, column 31: the JSON object is not closed; a JSON lines trace holds one whole object per line`},
		{"an empty CSV file", "csv", "",
			`line 1: the file is empty; a CSV trace starts with a header row naming its columns, e.g. submit,job,gpus,work`},
		{"a header only", "csv", "submit,job,gpus,work\n",
			`the trace has no rows; give at least one job row`},
		{"an empty JSON lines file", "jsonl", "\n\n",
			`the trace has no rows; give at least one job row`},
		{"health rows only", "csv", "submit,node,health\n0,default-0,unhealthy\n",
			`the trace has no jobs, only 1 health rows; give at least one job row`},
		{"binary data", "csv", binary,
			`line 1, column 1: binary data ("\x89PNG\r\n\x1a\n"), not a CSV trace`},
		{"a gzip file without .gz", "jsonl", "\x1f\x8b\x08\x00rest",
			`line 1, column 1: the file is gzip-compressed, not JSON lines; name it with .gz after the format (trace.csv.gz)`},
		{"a long unknown column", "csv", strings.Repeat("x", 700) + "\n",
			`line 1: field 1 of the header: unknown column "` + strings.Repeat("x", 40) + `"... (700 bytes); valid columns: ` + strings.Join(traceColumns, ", ")},
		{"a misspelt column", "csv", "submit,job,budegt,gpus,work\n",
			`line 1: field 3 of the header: unknown column "budegt" (did you mean "budget"?); valid columns: ` + strings.Join(traceColumns, ", ")},
		{"a misspelt JSON key", "jsonl", `{"submit":0,"job":"a","budegt":"x","gpus":1,"work":600}`,
			`line 1, column 23: unknown key "budegt" (did you mean "budget"?); valid keys: ` + strings.Join(traceColumns, ", ") + `, and "at" for "submit"`},
		{"a column twice", "csv", "submit,job,gpus,work,GPUS\n",
			`line 1: column "gpus" is both field 3 and field 5 of the header; name each column once`},
		{"a health row with job fields", "csv", "submit,job,gpus,work,node,health\n0,a,1,10m,default-0,unhealthy\n",
			`line 2: a health row (node "default-0") also gives job, gpus, work; a row is either a job or a health event`},
		{"a job row with health fields", "csv", "submit,job,gpus,work,node,health,gpu\n0,a,1,10m,,,3\n",
			`line 2: a job row gives gpu but no node; those columns belong to a health row`},
		{"an untrappable checkpoint signal", "csv", "submit,job,gpus,work,checkpoint_signal,checkpoint_notice\n0,a,1,10m,SIGKILL,2m\n",
			`line 2: job "a": checkpoint_signal "SIGKILL": want one of SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH`},
		{"a checkpoint notice without a signal", "jsonl", `{"submit":0,"job":"a","gpus":1,"work":600,"checkpoint_notice":"2m"}`,
			`line 1: job "a": checkpoint_notice 2m0s without checkpoint_signal; give both (e.g. SIGUSR1) or neither`},
		{"a checkpoint signal without a notice", "csv", "submit,job,gpus,work,checkpoint_signal\n0,a,1,10m,usr1\n",
			`line 2: job "a": checkpoint_signal SIGUSR1 without checkpoint_notice; give both (e.g. 5m) or neither`},
		{"a checkpoint notice that is no duration", "csv", "submit,job,gpus,work,checkpoint_signal,checkpoint_notice\n0,a,1,10m,SIGUSR1,soon\n",
			`line 2: checkpoint_notice "soon" is not a duration; give a Go duration such as "90m" or seconds`},
		{"a negative kill_timeout", "csv", "submit,job,gpus,work,kill_timeout\n0,a,1,10m,-5s\n",
			`line 2: job "a": kill_timeout -5s must be positive (or absent: Nomad's default 5s)`},
		{"a kill_timeout that is no duration", "jsonl", `{"submit":0,"job":"a","gpus":1,"work":600,"kill_timeout":"long"}`,
			`line 1: kill_timeout "long" is not a duration; give a Go duration such as "90m" or seconds`},
		{"a CSV quote out of place", "csv", "submit,job,gpus,work\n0,a\"b,1,10m\n",
			`line 2, column 4: bare " in non-quoted-field`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := ReadCSV
			if tc.format == "jsonl" {
				read = ReadJSONL
			}
			_, err := read(strings.NewReader(tc.in), ReadOptions{})
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error\n  %v\nwant\n  %s", err, tc.want)
			}
			var te *TraceError
			if !errors.As(err, &te) || !errors.Is(err, ErrInvalidTrace) {
				t.Errorf("%T is not a *TraceError and ErrInvalidTrace", err)
			}
		})
	}
}

// -skip-invalid drops the rows it would refuse, counted, and keeps the first
// of two jobs with one ID.
func TestReadTraceSkipsDuplicatesAndShortRows(t *testing.T) {
	in := "submit,job,gpus,work,min_runtime\n0,a,1,10m,5m\n60,a,2,10m,5m\n90,b,1,10m\n120,c,1,10m,0\n"
	tr, err := ReadCSV(strings.NewReader(in), ReadOptions{SkipInvalid: true})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range tr.Jobs {
		ids = append(ids, j.ID)
	}
	if tr.Skipped != 2 || strings.Join(ids, " ") != "a c" || tr.Jobs[0].GPUs != 1 {
		t.Fatalf("skipped %d, jobs %v (first has %d GPUs); want 2 skipped, a (1 GPU) and c", tr.Skipped, ids, tr.Jobs[0].GPUs)
	}
}

// A byte order mark before the header (spreadsheets write one) is not part
// of the first column's name.
func TestReadCSVByteOrderMark(t *testing.T) {
	tr, err := ReadCSV(strings.NewReader("\uFEFFsubmit,job,gpus,work\n0,a,1,10m\n"), ReadOptions{})
	if err != nil || len(tr.Jobs) != 1 {
		t.Fatalf("%v", err)
	}
}

// JSON lines keys, like CSV header names, are read without regard to case.
func TestReadJSONLKeysAnyCase(t *testing.T) {
	tr, err := ReadJSONL(strings.NewReader(`{"Submit":0,"JOB":"a","Gpus":2,"work":"10m","Min_Runtime":"5m"}`+"\n"+
		`{"AT":60,"node":"default-0","health":"unhealthy"}`), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if j := tr.Jobs[0]; j.ID != "a" || j.GPUs != 2 || j.MinRuntime != 5*time.Minute || len(tr.Health) != 1 || tr.Health[0].At != time.Minute {
		t.Fatalf("read %+v and %+v", tr.Jobs, tr.Health)
	}
}
