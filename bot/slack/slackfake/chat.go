package slackfake

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
)

// wire is the message object Slack returns from chat.postMessage/chat.update.
func (m *Message) wire() map[string]any {
	w := map[string]any{
		"type": "message",
		"user": m.User,
		"text": m.Text,
		"ts":   m.TS,
		"team": TeamID,
	}
	if m.User == BotUserID {
		w["bot_id"] = BotID
		w["app_id"] = AppID
		w["bot_profile"] = map[string]any{"id": BotID, "app_id": AppID, "name": BotName, "team_id": TeamID, "deleted": false}
	}
	if m.Blocks != nil {
		w["blocks"] = json.RawMessage(m.Blocks)
	}
	if m.ThreadTS != "" {
		w["thread_ts"] = m.ThreadTS
		w["parent_user_id"] = BotUserID
	}
	if m.Metadata != nil {
		w["metadata"] = json.RawMessage(m.Metadata)
	}
	if len(m.Files) > 0 {
		files := make([]map[string]any, len(m.Files))
		for i, id := range m.Files {
			files[i] = map[string]any{"id": id}
		}
		w["files"] = files
	}
	return w
}

func (m *Message) clone() Message {
	c := *m
	c.Blocks = cloneRaw(m.Blocks)
	c.History = slices.Clone(m.History)
	for i := range c.History {
		c.History[i].Blocks = cloneRaw(c.History[i].Blocks)
	}
	c.Files = slices.Clone(m.Files)
	return c
}

// edit replaces a message's text and blocks, keeping the old version.
func (m *Message) edit(text string, blocks json.RawMessage, now time.Time) {
	m.History = append(m.History, Revision{Text: m.Text, Blocks: m.Blocks, At: now})
	m.Text, m.Blocks = text, blocks
	m.Edits++
}

// hasBlocks reports whether a blocks value holds at least one block.
func hasBlocks(b json.RawMessage) bool { return len(b) > 0 && string(b) != "[]" }

// resolveChannelLocked maps a channel argument to a channel ID: C… and G…
// are channels, D… must have been opened, U…/W… posts to the user's DM.
// byName also accepts a channel's name, "#gpu-nlp" or "gpu-nlp", as Slack's
// chat.postMessage and chat.postEphemeral do; the methods that act on a
// message Slack returned (chat.update, chat.delete, chat.getPermalink…) want
// the ID, and a name gets channel_not_found, as from Slack.
func (s *Server) resolveChannelLocked(ch string, byName bool) (string, *apiError) {
	if name, ok := channelNameOf(ch); ok {
		if !byName {
			s.logf("channel %q is a name; this method wants the channel's ID (%s)", ch, s.channelIDLocked(name))
			return "", fail("channel_not_found")
		}
		return s.channelIDLocked(name), nil
	}
	switch {
	case ch == "":
		return "", fail("channel_not_found")
	case ch[0] == 'C' || ch[0] == 'G':
		return ch, nil
	case ch[0] == 'D':
		for _, d := range s.dmByUser {
			if d == ch {
				return ch, nil
			}
		}
	case ch[0] == 'U' || ch[0] == 'W':
		if _, ok := s.users[ch]; ok {
			d, _ := s.dmLocked(ch)
			return d, nil
		}
	}
	return "", fail("channel_not_found")
}

// channelNameOf reports whether ch is a channel name rather than an ID, and
// returns the name without its "#". IDs are upper case (C0GPU, D0000001);
// names are lower case letters, digits, "-", "_" and ".", up to 80 characters,
// optionally after a "#".
func channelNameOf(ch string) (string, bool) {
	name := strings.TrimPrefix(ch, "#")
	if name == "" || len(name) > 80 {
		return "", false
	}
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
		default:
			return "", false
		}
	}
	return name, true
}

// channelIDLocked returns the ID of the channel with this name (without
// "#"): a stable ID made from the name, the same in every fake, so that
// logs and failures read the same from run to run.
func (s *Server) channelIDLocked(name string) string {
	if id, ok := s.chanByName[name]; ok {
		return id
	}
	sum := sha256.Sum256([]byte("slackfake channel " + name))
	id := "C" + base32.StdEncoding.EncodeToString(sum[:])[:10]
	if _, taken := s.nameByChan[id]; taken {
		id = s.nextIDLocked("C") // a collision of 50 bits: never, but stay correct
	}
	s.chanByName[name], s.nameByChan[id] = id, name
	return id
}

// ChannelID returns the ID Slack answers for a channel name ("#gpu-nlp" or
// "gpu-nlp"): chat.postMessage to the name posts in, and returns, this ID.
// Given an ID, it returns it unchanged.
func (s *Server) ChannelID(channel string) string {
	name, ok := channelNameOf(channel)
	if !ok {
		return channel
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.channelIDLocked(name)
}

// dmLocked returns the user's DM channel with the bot, opening it if needed;
// existed reports whether it was open already.
func (s *Server) dmLocked(user string) (id string, existed bool) {
	if d, ok := s.dmByUser[user]; ok {
		return d, true
	}
	d := s.nextIDLocked("D")
	s.dmByUser[user] = d
	return d, false
}

// findLocked returns the channel message with this ts (not deleted), or nil.
func (s *Server) findLocked(channel, ts string) *Message {
	for _, m := range s.messages {
		if m.Channel == channel && m.TS == ts && !m.Deleted {
			return m
		}
	}
	return nil
}

// messageContent validates text and blocks of a post.
func messageContent(r *request) (string, json.RawMessage, *apiError) {
	text := r.str("text")
	blocks, code, msgs := checkMessageBlocks(r.raw("blocks"))
	if code != "" {
		return "", nil, fail(code, msgs...)
	}
	if code := checkText(text, hasBlocks(blocks)); code != "" {
		return "", nil, fail(code)
	}
	if !hasBlocks(blocks) {
		blocks = nil
	}
	return text, blocks, nil
}

func (s *Server) chatPostMessage(r *request) (map[string]any, *apiError) {
	text, blocks, e := messageContent(r)
	if e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, e := s.resolveChannelLocked(r.str("channel"), true)
	if e != nil {
		return nil, e
	}
	threadTS := r.str("thread_ts")
	if threadTS != "" {
		if parent := s.findLocked(ch, threadTS); parent == nil {
			s.logf("chat.postMessage: thread_ts %s matches no message in %s", threadTS, ch)
		} else if parent.ThreadTS != "" {
			threadTS = parent.ThreadTS // a reply to a reply goes to the thread
		}
	}
	m := &Message{
		Channel: ch, TS: s.nextTSLocked(), ThreadTS: threadTS, User: BotUserID,
		Text: text, Blocks: blocks, Via: "chat.postMessage", PostedAt: time.Now(), Metadata: cloneRaw(r.raw("metadata")),
	}
	s.messages = append(s.messages, m)
	s.notifyLocked()
	return map[string]any{"channel": ch, "ts": m.TS, "message": m.wire()}, nil
}

// ownMessageLocked finds the message of a chat.update or chat.delete (channel,
// ts), which must be the bot's; notMine is the error when it is someone else's.
func (s *Server) ownMessageLocked(r *request, notMine string) (string, *Message, *apiError) {
	ch, e := s.resolveChannelLocked(r.str("channel"), false)
	if e != nil {
		return "", nil, e
	}
	m := s.findLocked(ch, r.str("ts"))
	switch {
	case m == nil:
		return "", nil, fail("message_not_found")
	case m.User != BotUserID:
		return "", nil, fail(notMine)
	}
	return ch, m, nil
}

func (s *Server) chatUpdate(r *request) (map[string]any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, m, e := s.ownMessageLocked(r, "cant_update_message")
	if e != nil {
		return nil, e
	}
	// Slack keeps the text and blocks that the update leaves out; "blocks":[]
	// removes the blocks.
	text, blocks := m.Text, m.Blocks
	if r.has("text") {
		text = r.str("text")
	}
	if r.has("blocks") {
		b, code, msgs := checkMessageBlocks(r.raw("blocks"))
		if code != "" {
			return nil, fail(code, msgs...)
		}
		blocks = nil
		if hasBlocks(b) {
			blocks = b
		}
	}
	if code := checkText(text, hasBlocks(blocks)); code != "" {
		return nil, fail(code)
	}
	m.edit(text, blocks, time.Now())
	s.notifyLocked()
	return map[string]any{"channel": ch, "ts": m.TS, "text": m.Text, "message": m.wire()}, nil
}

func (s *Server) chatDelete(r *request) (map[string]any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, m, e := s.ownMessageLocked(r, "cant_delete_message")
	if e != nil {
		return nil, e
	}
	m.Deleted = true
	s.notifyLocked()
	return map[string]any{"channel": ch, "ts": m.TS}, nil
}

func (s *Server) chatPostEphemeral(r *request) (map[string]any, *apiError) {
	text, blocks, e := messageContent(r)
	if e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, e := s.resolveChannelLocked(r.str("channel"), true)
	if e != nil {
		return nil, e
	}
	user := r.str("user")
	if _, ok := s.users[user]; !ok {
		return nil, fail("user_not_in_channel")
	}
	m := &Message{
		Channel: ch, TS: s.nextTSLocked(), ThreadTS: r.str("thread_ts"), User: user,
		Text: text, Blocks: blocks, Via: "chat.postEphemeral", PostedAt: time.Now(),
	}
	s.ephemeral = append(s.ephemeral, m)
	s.notifyLocked()
	return map[string]any{"message_ts": m.TS}, nil
}

func (s *Server) chatGetPermalink(r *request) (map[string]any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, e := s.resolveChannelLocked(r.str("channel"), false)
	if e != nil {
		return nil, e
	}
	m := s.findLocked(ch, r.str("message_ts"))
	if m == nil {
		return nil, fail("message_not_found")
	}
	link := "https://" + TeamDomain + ".slack.com/archives/" + ch + "/p" + strings.ReplaceAll(m.TS, ".", "")
	if m.ThreadTS != "" {
		link += "?thread_ts=" + m.ThreadTS + "&cid=" + ch
	}
	return map[string]any{"channel": ch, "permalink": link}, nil
}

func (s *Server) conversationsOpen(r *request) (map[string]any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var users []string
	for u := range strings.SplitSeq(r.str("users"), ",") {
		if u = strings.TrimSpace(u); u != "" {
			users = append(users, u)
		}
	}
	var id string
	existed := false
	switch {
	case len(users) == 0 && r.str("channel") != "":
		ch, e := s.resolveChannelLocked(r.str("channel"), false)
		if e != nil {
			return nil, e
		}
		id, existed = ch, true
	case len(users) == 0:
		return nil, fail("users_list_not_supplied")
	default:
		for _, u := range users {
			if _, ok := s.users[u]; !ok {
				return nil, fail("user_not_found")
			}
		}
		if len(users) > 8 {
			return nil, fail("too_many_users")
		}
		slices.Sort(users)
		key := strings.Join(users, ",")
		if d, ok := s.dmByUser[key]; ok {
			id, existed = d, true
		} else {
			prefix := "D"
			if len(users) > 1 {
				prefix = "G" // a multi-person DM
			}
			id = s.nextIDLocked(prefix)
			s.dmByUser[key] = id
		}
	}
	s.notifyLocked()
	if !r.bool("return_im") {
		out := map[string]any{"channel": map[string]any{"id": id}}
		if existed {
			out["no_op"], out["already_open"] = true, true
		}
		return out, nil
	}
	ch := map[string]any{
		"id": id, "created": time.Now().Unix(), "is_im": len(users) <= 1, "is_mpim": len(users) > 1,
		"is_org_shared": false, "last_read": "0000000000.000000", "latest": nil,
		"unread_count": 0, "unread_count_display": 0, "is_open": true, "priority": 0,
	}
	if len(users) == 1 {
		ch["user"] = users[0]
	}
	out := map[string]any{"channel": ch}
	if existed {
		out["already_open"] = true
	}
	return out, nil
}

// userWire is the user object of users.info.
func userWire(u User) map[string]any {
	label, offset := "Coordinated Universal Time", 0
	if loc, err := time.LoadLocation(u.TZ); err == nil {
		label, offset = time.Now().In(loc).Zone()
	}
	return map[string]any{
		"id": u.ID, "team_id": TeamID, "name": u.Name, "deleted": false,
		"real_name": u.RealName, "tz": u.TZ, "tz_label": label, "tz_offset": offset,
		"is_bot": u.IsBot, "is_admin": false, "is_owner": false, "is_app_user": false,
		"is_restricted": false, "is_ultra_restricted": false, "updated": 1764576000,
		"profile": map[string]any{
			"real_name": u.RealName, "real_name_normalized": u.RealName,
			"display_name": u.Name, "display_name_normalized": u.Name,
			"email": u.Email, "team": TeamID,
		},
	}
}

func (s *Server) usersInfo(r *request) (map[string]any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[r.str("user")]
	if !ok {
		return nil, fail("user_not_found")
	}
	return map[string]any{"user": userWire(u)}, nil
}

func (s *Server) usersLookupByEmail(r *request) (map[string]any, *apiError) {
	email := strings.ToLower(r.str("email"))
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range s.users {
		if u.Email != "" && strings.ToLower(u.Email) == email {
			return map[string]any{"user": userWire(u)}, nil
		}
	}
	return nil, fail("users_not_found")
}

// conversationsHistory answers conversations.history: the channel's
// top-level messages, newest first, up to limit (default 100), with their
// metadata when include_all_metadata is set.
func (s *Server) conversationsHistory(r *request) (map[string]any, *apiError) {
	return s.listMessages(r, func(m *Message) bool { return m.ThreadTS == "" })
}

// conversationsReplies answers conversations.replies: the message ts and
// its thread, oldest first.
func (s *Server) conversationsReplies(r *request) (map[string]any, *apiError) {
	ts := r.str("ts")
	return s.listMessages(r, func(m *Message) bool { return m.TS == ts || m.ThreadTS == ts })
}

func (s *Server) listMessages(r *request, keep func(*Message) bool) (map[string]any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, e := s.resolveChannelLocked(r.str("channel"), false)
	if e != nil {
		return nil, e
	}
	limit, _ := strconv.Atoi(r.str("limit"))
	if limit <= 0 {
		limit = 100
	}
	withMeta := r.bool("include_all_metadata")
	var out []map[string]any
	for i := len(s.messages) - 1; i >= 0 && len(out) < limit; i-- {
		m := s.messages[i]
		if m.Channel != ch || m.Deleted || m.Via == "chat.postEphemeral" || !keep(m) {
			continue
		}
		w := m.wire()
		if !withMeta {
			delete(w, "metadata")
		}
		out = append(out, w)
	}
	if out == nil {
		out = []map[string]any{}
	}
	return map[string]any{"messages": out, "has_more": false}, nil
}
