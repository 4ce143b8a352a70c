package slackfake

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

func (s *Server) filesGetUploadURLExternal(r *request) (map[string]any, *apiError) {
	name := r.str("filename")
	n, err := strconv.Atoi(r.str("length"))
	switch {
	case name == "":
		return nil, fail("invalid_arguments", "[ERROR] missing required field: filename")
	case err != nil || n <= 0:
		return nil, fail("invalid_arguments", "[ERROR] length must be a positive integer")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if alt := r.str("alt_txt"); len([]rune(alt)) > 1000 {
		return nil, fail("invalid_arguments", "[ERROR] alt_txt must be at most 1000 characters")
	}
	f := &File{ID: s.nextIDLocked("F"), Name: name, AltText: r.str("alt_txt"), Length: n, At: time.Now()}
	s.files = append(s.files, f)
	s.fileByID[f.ID] = f
	s.notifyLocked()
	// The upload URL is on the API's host: slack-go sends the bot token with
	// the upload and refuses hosts other than Slack's or the API URL's.
	return map[string]any{"upload_url": s.http.URL + "/upload/v1/" + f.ID, "file_id": f.ID}, nil
}

// serveUpload receives a file's bytes, raw or as multipart/form-data.
func (s *Server) serveUpload(w http.ResponseWriter, hr *http.Request) {
	id := strings.TrimPrefix(hr.URL.Path, "/upload/v1/")
	content, err := readUpload(hr)
	s.mu.Lock()
	f := s.fileByID[id]
	if f != nil && err == nil {
		f.Content, f.Uploaded = content, true
		s.notifyLocked()
	}
	s.mu.Unlock()
	switch {
	case hr.Method != http.MethodPost:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	case f == nil:
		http.Error(w, "not found", http.StatusNotFound)
	case err != nil:
		s.logf("upload %s: %v", id, err)
		http.Error(w, "bad upload", http.StatusBadRequest)
	default:
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "OK - %d", len(content))
	}
}

func readUpload(hr *http.Request) ([]byte, error) {
	mt, params, _ := mime.ParseMediaType(hr.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		return io.ReadAll(io.LimitReader(hr.Body, maxBody))
	}
	mr := multipart.NewReader(hr.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err != nil {
			return nil, fmt.Errorf("no file part: %w", err)
		}
		if p.FileName() != "" || p.FormName() == "file" {
			return io.ReadAll(io.LimitReader(p, maxBody))
		}
	}
}

func (s *Server) filesCompleteUploadExternal(r *request) (map[string]any, *apiError) {
	var list []struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	}
	if err := json.Unmarshal(r.raw("files"), &list); err != nil || len(list) == 0 {
		return nil, fail("invalid_arguments", "[ERROR] files must be a JSON array of {id, title}")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	channel := r.str("channel_id")
	if channel == "" {
		channel, _, _ = strings.Cut(r.str("channels"), ",")
	}
	if channel != "" {
		ch, e := s.resolveChannelLocked(channel, false)
		if e != nil {
			return nil, e
		}
		channel = ch
	}
	for _, it := range list {
		f := s.fileByID[it.ID]
		if f == nil || !f.Uploaded || f.Completed {
			return nil, fail("file_not_found")
		}
	}
	out := make([]map[string]any, 0, len(list))
	ids := make([]string, 0, len(list))
	for _, it := range list {
		f := s.fileByID[it.ID]
		f.Title, f.Completed = it.Title, true
		if f.Title == "" {
			f.Title = f.Name
		}
		f.Channel, f.ThreadTS, f.InitialComment = channel, r.str("thread_ts"), r.str("initial_comment")
		out = append(out, map[string]any{"id": f.ID, "title": f.Title})
		ids = append(ids, f.ID)
	}
	if channel != "" {
		blocks, _, _ := checkMessageBlocks(r.raw("blocks"))
		s.messages = append(s.messages, &Message{
			Channel: channel, TS: s.nextTSLocked(), ThreadTS: r.str("thread_ts"), User: BotUserID,
			Text: r.str("initial_comment"), Blocks: blocks, Files: ids,
			Via: "files.completeUploadExternal", PostedAt: time.Now(),
		})
	}
	s.notifyLocked()
	return map[string]any{"files": out}, nil
}

// Files returns every file started with files.getUploadURLExternal, in order.
func (s *Server) Files() []File {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]File, len(s.files))
	for i, f := range s.files {
		out[i] = *f
		out[i].Content = slices.Clone(f.Content)
	}
	return out
}
