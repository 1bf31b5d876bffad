package reference

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/containerd/log"

	"github.com/gensee/gensee/spec"
)

// Handler serves POST spec.AnalyzerPath: a strictly decoded
// spec.AnalyzerRequest of at most spec.MaxAnalyzerRequest bytes in, a
// spec.AnalyzerAnswer out (200, no class included). A malformed request
// gets 400, a body too large 413, another path 404, another method 405.
// Each request logs one line: selector, door, observation digest, outcome,
// time taken; never the command's environment.
func (a *Analyzer) Handler() http.Handler {
	return http.HandlerFunc(a.serveHTTP)
}

func (a *Analyzer) serveHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.URL.Path != spec.AnalyzerPath {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, spec.MaxAnalyzerRequest))
	var req spec.AnalyzerRequest
	if err == nil {
		if derr := spec.DecodeStrict(body, &req, spec.MaxAnalyzerRequest); derr != nil {
			err = fmt.Errorf("%w: %w", ErrBadRequest, derr)
		}
	}
	var res Result
	if err == nil {
		res, err = a.Infer(r.Context(), req, a.now())
	}
	entry := log.G(r.Context()).WithFields(log.Fields{
		"selector": req.Selector, "door": req.Door, "observation_digest": res.Digest, "took": time.Since(start).String(),
	})
	if err != nil {
		entry.WithError(err).Warn("analyzer: request refused")
		http.Error(w, err.Error(), status(err))
		return
	}
	b, err := json.Marshal(res.Answer)
	if err != nil {
		entry.WithError(err).Error("analyzer: encode answer")
		http.Error(w, "encode answer", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(b, '\n'))
	if res.Top != nil {
		entry.WithField("outcome", "inference").WithField("class", res.Top.Class).WithField("confidence_bp", res.Top.ConfidenceBP).Info("analyzer: answered")
		return
	}
	entry.WithField("outcome", "no_class").WithField("reason", res.Answer.NoClass).Info("analyzer: answered")
}

// status is the HTTP status of a refused request.
func status(err error) int {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}
