package sqlfront

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	pg "github.com/minkdb/mink/sqlfront/pgtree"

	"github.com/minkdb/mink/sqlfront/pgwire"
)

// setting is one session setting (GUC).
type setting struct {
	def         string
	description string
	readOnly    bool
	// report: changes are sent to the client as ParameterStatus.
	report bool
	// check validates and normalises a new value.
	check func(v string) (string, error)
}

var knownSettings = map[string]*setting{
	"application_name":                    {description: "Sets the application name to be reported in statistics and logs.", report: true},
	"client_encoding":                     {def: "UTF8", description: "Sets the client's character set encoding.", report: true, check: checkEncoding},
	"server_encoding":                     {def: "UTF8", readOnly: true, description: "Shows the server (database) character set encoding."},
	"datestyle":                           {def: "ISO, MDY", description: "Sets the display format for date and time values.", report: true}, // checked in set: the check depends on the current value
	"intervalstyle":                       {def: "postgres", description: "Sets the display format for interval values.", report: true, check: checkOneOf("postgres")},
	"timezone":                            {def: "UTC", description: "Sets the time zone for displaying and interpreting time stamps.", report: true},
	"integer_datetimes":                   {def: "on", readOnly: true, description: "Shows whether datetimes are integer based.", report: true},
	"standard_conforming_strings":         {def: "on", description: "Causes '...' strings to treat backslashes literally.", report: true, check: checkOneOf("on")},
	"server_version":                      {def: pgwire.DefaultServerVersion, readOnly: true, description: "Shows the server version."},
	"server_version_num":                  {def: "150000", readOnly: true, description: "Shows the server version as an integer."},
	"search_path":                         {def: `"$user", public`, description: "Sets the schema search order for names that are not schema-qualified."},
	"extra_float_digits":                  {def: "1", description: "Sets the number of digits displayed for floating-point values."},
	"statement_timeout":                   {def: "0", description: "Sets the maximum allowed duration of any statement.", check: checkMilliseconds},
	"lock_timeout":                        {def: "0", description: "Sets the maximum allowed duration of any wait for a lock.", check: checkMilliseconds},
	"idle_in_transaction_session_timeout": {def: "0", description: "Sets the maximum allowed idle time between queries, when in a transaction.", check: checkMilliseconds},
	"default_transaction_read_only":       {def: "off", description: "Sets the default read-only status of new transactions.", report: true},
	"default_transaction_isolation":       {def: "read committed", description: "Sets the transaction isolation level of each new transaction."},
	"transaction_isolation":               {def: "read committed", description: "Sets the current transaction's isolation level."},
	"transaction_read_only":               {def: "off", description: "Sets the current transaction's read-only status."},
	"is_superuser":                        {def: "on", readOnly: true, description: "Shows whether the current user is a superuser.", report: true},
	"session_authorization":               {readOnly: true, description: "Sets the session user name.", report: true},
	"in_hot_standby":                      {def: "off", readOnly: true, description: "Shows whether hot standby is currently active.", report: true},
	"max_identifier_length":               {def: "63", readOnly: true, description: "Shows the maximum identifier length."},
	"lc_messages":                         {def: "C", description: "Sets the language in which messages are displayed."},
	"lc_monetary":                         {def: "C", description: "Sets the locale for formatting monetary amounts."},
	"lc_numeric":                          {def: "C", description: "Sets the locale for formatting numbers."},
	"lc_time":                             {def: "C", description: "Sets the locale for formatting date and time values."},
	"lc_collate":                          {def: "C", readOnly: true, description: "Shows the collation order locale."},
	"lc_ctype":                            {def: "C", readOnly: true, description: "Shows the character classification and case conversion locale."},
	"bytea_output":                        {def: "hex", description: "Sets the output format for bytea.", check: checkOneOf("hex")},
	"client_min_messages":                 {def: "notice", description: "Sets the message levels that are sent to the client."},
	"row_security":                        {def: "on", description: "Enable row security."},
	"synchronous_commit":                  {def: "on", description: "Sets the current transaction's synchronization level."},
	"work_mem":                            {def: "4MB", description: "Sets the maximum memory to be used for query workspaces."},
	"jit":                                 {def: "off", description: "Allow JIT compilation."},
}

// displayName is how SHOW ALL and error messages spell a setting.
var displayName = map[string]string{
	"datestyle": "DateStyle", "intervalstyle": "IntervalStyle", "timezone": "TimeZone",
}

func display(name string) string {
	if d, ok := displayName[name]; ok {
		return d
	}
	return name
}

func checkOneOf(allowed ...string) func(string) (string, error) {
	return func(v string) (string, error) {
		for _, a := range allowed {
			if strings.EqualFold(v, a) {
				return a, nil
			}
		}
		return "", fmt.Errorf("only %s is supported", strings.Join(allowed, ", "))
	}
}

// checkMilliseconds reads a time setting whose unit is milliseconds (an
// integer, or a number with a unit: us, ms, s, min, h, d) and renders it the
// way SHOW does in PostgreSQL: in the largest unit that keeps it whole.
func checkMilliseconds(v string) (string, error) {
	v = strings.TrimSpace(v)
	num := strings.TrimRightFunc(v, func(r rune) bool { return r >= 'a' && r <= 'z' || r == ' ' })
	unit := strings.TrimSpace(v[len(num):])
	x, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return "", fmt.Errorf("not a duration")
	}
	perUnit := map[string]float64{"": 1, "us": 0.001, "ms": 1, "s": 1000, "min": 60000, "h": 3600000, "d": 86400000}
	f, ok := perUnit[unit]
	if !ok {
		return "", fmt.Errorf(`valid units for this parameter are "us", "ms", "s", "min", "h", and "d"`)
	}
	ms := int64(math.Round(x * f))
	if ms < 0 || ms > math.MaxInt32 {
		return "", fmt.Errorf("out of range")
	}
	if ms == 0 {
		return "0", nil
	}
	for _, u := range []struct {
		name string
		ms   int64
	}{{"d", 86400000}, {"h", 3600000}, {"min", 60000}, {"s", 1000}} {
		if ms%u.ms == 0 {
			return fmt.Sprintf("%d%s", ms/u.ms, u.name), nil
		}
	}
	return fmt.Sprintf("%dms", ms), nil
}

func checkEncoding(v string) (string, error) {
	switch strings.ToUpper(strings.ReplaceAll(strings.ReplaceAll(v, "-", ""), "_", "")) {
	case "UTF8", "UNICODE":
		return "UTF8", nil
	}
	return "", fmt.Errorf("mink only speaks UTF8")
}

// checkDateStyle validates a DateStyle; like PostgreSQL, a value that names
// no field order keeps the current one (cur).
func checkDateStyle(cur, v string) (string, error) {
	parts := strings.Split(v, ",")
	order := "MDY"
	if _, o, ok := strings.Cut(cur, ", "); ok {
		order = o
	}
	for _, p := range parts {
		switch strings.ToUpper(strings.TrimSpace(p)) {
		case "ISO", "":
		case "MDY", "US", "NONEURO", "NONEUROPEAN":
			order = "MDY"
		case "DMY", "EURO", "EUROPEAN":
			order = "DMY"
		case "YMD":
			order = "YMD"
		default:
			return "", fmt.Errorf("only the ISO output style is supported")
		}
	}
	return "ISO, " + order, nil
}

// settings are a session's settings.
type settings struct {
	values map[string]string
	// superuser reports whether the session's role is a superuser now:
	// is_superuser follows it (ALTER ROLE … [NO]SUPERUSER holds from the
	// next statement, as the privilege checks do). nil: the default, on.
	superuser func() bool
	// custom holds placeholder settings with a dot in the name ("app.x").
	told map[string]string
	// tx is what the open transaction block changed.
	tx txSettings
}

func newSettings(info pgwire.SessionInfo) *settings {
	st := &settings{values: map[string]string{}, told: map[string]string{}}
	for name, s := range knownSettings {
		st.values[name] = s.def
	}
	st.values["session_authorization"] = info.User
	st.values["application_name"] = info.ApplicationName
	return st
}

func sessionTimeZone(info pgwire.SessionInfo) string {
	for k, v := range info.Params {
		if strings.EqualFold(k, "timezone") {
			return v
		}
	}
	return "UTC"
}

// applyStartupParams applies settings the client sent at startup (TimeZone,
// DateStyle, application_name, options -c …).
//
// It runs once the session's role is known, and ties is_superuser to it.
func (s *session) applyStartupParams(ctx context.Context) error {
	s.settings.superuser = s.isSuperuser
	s.settings.refreshRole()
	for k, v := range s.info.Params {
		name := strings.ToLower(k)
		if name == "user" || name == "database" || name == "options" || name == "replication" {
			continue
		}
		if _, known := knownSettings[name]; !known && !strings.Contains(name, ".") {
			continue // PostgreSQL rejects these; drivers send harmless extras
		}
		if err := s.set(ctx, name, v); err != nil {
			return err
		}
	}
	return nil
}

// set changes one setting (SET, RESET, set_config), and notes the change
// for the open transaction block, if any.
func (s *session) set(ctx context.Context, name, value string) error {
	name = strings.ToLower(name)
	s.noteSettingChange(name, false)
	if ts := s.settings.tx; ts.session != nil {
		if _, ok := ts.session[name]; ok {
			// A plain SET after SET LOCAL is what the block ends with.
			defer func() { ts.session[name] = s.settings.values[name] }()
		}
	}
	return s.applySetting(ctx, name, value)
}

// applySetting checks and applies one setting's new value.
func (s *session) applySetting(ctx context.Context, name, value string) error {
	def, known := knownSettings[name]
	if !known {
		if strings.Contains(name, ".") {
			s.settings.values[name] = value
			return nil
		}
		return errorf(pgwire.CodeUndefinedObject, "unrecognized configuration parameter %q", name)
	}
	if def.readOnly {
		if value == s.settings.values[name] {
			return nil
		}
		return errorf("55P02", "parameter %q cannot be changed", name)
	}
	check := def.check
	if name == "datestyle" {
		cur := s.settings.values[name]
		check = func(v string) (string, error) { return checkDateStyle(cur, v) }
	}
	if check != nil {
		v, err := check(value)
		if err != nil {
			return errorf(pgwire.CodeInvalidParameterValue, "invalid value for parameter %q: %q: %v", display(name), value, err)
		}
		value = v
	}
	if name == "timezone" {
		if err := s.conn.SetTimeZone(ctx, value); err != nil {
			return errorf(pgwire.CodeInvalidParameterValue, "invalid value for parameter \"TimeZone\": %q", value)
		}
	}
	s.settings.values[name] = value
	return nil
}

func (s *session) reset(ctx context.Context, name string) error {
	name = strings.ToLower(name)
	def, known := knownSettings[name]
	if !known {
		if strings.Contains(name, ".") {
			// A placeholder stays defined once set, as in PostgreSQL.
			if _, ok := s.settings.values[name]; ok {
				s.settings.values[name] = ""
			}
			return nil
		}
		return errorf(pgwire.CodeUndefinedObject, "unrecognized configuration parameter %q", name)
	}
	if def.readOnly {
		return nil
	}
	value := def.def
	switch name {
	case "timezone":
		value = sessionTimeZone(s.info)
	case "application_name":
		value = s.info.ApplicationName
	}
	return s.set(ctx, name, value)
}

// reported returns every reported setting whose value the client has not
// been told yet.
// It runs after every statement: it looks only at the reported settings and
// allocates nothing when none changed (nil).
func (st *settings) reported() map[string]string {
	st.refreshRole()
	var out map[string]string
	for _, name := range reportedSettings {
		v := st.values[name]
		if st.told[name] != v {
			if out == nil {
				out = map[string]string{}
			}
			out[display(name)] = v
			st.told[name] = v
		}
	}
	return out
}

// refreshRole sets is_superuser from the session's role.
func (st *settings) refreshRole() {
	if st.superuser == nil {
		return
	}
	v := "off"
	if st.superuser() {
		v = "on"
	}
	st.values["is_superuser"] = v
}

// reportedSettings are the names of the knownSettings with report set.
var reportedSettings = func() []string {
	var names []string
	for name, def := range knownSettings {
		if def.report {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}()

// settingValue renders a VariableSetStmt argument list as a setting value.
func settingValue(args []*pg.Node) (string, error) {
	var parts []string
	for _, a := range args {
		c := a.GetAConst()
		if c == nil {
			if tc := a.GetTypeCast(); tc != nil && tc.Arg.GetAConst() != nil {
				c = tc.Arg.GetAConst()
			} else {
				return "", unsupported("SET with a non-constant value")
			}
		}
		switch v := c.Val.(type) {
		case *pg.A_Const_Sval:
			parts = append(parts, v.Sval.Sval)
		case *pg.A_Const_Ival:
			parts = append(parts, fmt.Sprint(v.Ival.Ival))
		case *pg.A_Const_Fval:
			parts = append(parts, v.Fval.Fval)
		case *pg.A_Const_Boolval:
			parts = append(parts, map[bool]string{true: "on", false: "off"}[v.Boolval.Boolval])
		default:
			return "", unsupported("SET to NULL")
		}
	}
	return strings.Join(parts, ", "), nil
}

func (s *session) planSet(v *pg.VariableSetStmt) (*stmt, error) {
	switch v.Kind {
	case pg.VariableSetKind_VAR_SET_VALUE:
		value, err := settingValue(v.Args)
		if err != nil {
			return nil, err
		}
		if v.IsLocal {
			return s.setLocal(v.Name, value), nil
		}
		return s.tagOnly("SET", func(ctx context.Context) error { return s.set(ctx, v.Name, value) }), nil
	case pg.VariableSetKind_VAR_SET_DEFAULT, pg.VariableSetKind_VAR_RESET:
		tag := "SET"
		if v.Kind == pg.VariableSetKind_VAR_RESET {
			tag = "RESET"
		}
		return s.tagOnly(tag, func(ctx context.Context) error { return s.reset(ctx, v.Name) }), nil
	case pg.VariableSetKind_VAR_RESET_ALL:
		return s.tagOnly("RESET", func(ctx context.Context) error { return s.resetAll(ctx) }), nil
	case pg.VariableSetKind_VAR_SET_MULTI:
		// SET TRANSACTION …, SET SESSION CHARACTERISTICS …: mink has one
		// isolation level; accept and ignore.
		return s.tagOnly("SET", func(ctx context.Context) error { return nil }), nil
	case pg.VariableSetKind_VAR_SET_CURRENT:
		return nil, unsupported("SET … FROM CURRENT is not supported")
	}
	return nil, unsupported("this form of SET is not supported")
}

// setLocal is SET LOCAL. Outside a transaction block it does nothing but
// warn, as in PostgreSQL. Inside one it sets the value until the block
// ends (endSettingsTx).
func (s *session) setLocal(name, value string) *stmt {
	return &stmt{run: func(ctx context.Context, _ []any) (pgwire.Result, error) {
		if err := s.checkTx(); err != nil {
			return pgwire.Result{}, err
		}
		if s.tx.status == pgwire.TxIdle {
			return pgwire.Result{Tag: "SET", Notices: []*pgwire.Error{{Severity: "WARNING", Code: "25P01", Message: "SET LOCAL can only be used in transaction blocks"}}}, nil
		}
		s.noteSettingChange(strings.ToLower(name), true)
		if err := s.applySetting(ctx, strings.ToLower(name), value); err != nil {
			return pgwire.Result{}, err
		}
		return pgwire.Result{Tag: "SET"}, nil
	}}
}

func (s *session) resetAll(ctx context.Context) error {
	for name, def := range knownSettings {
		if !def.readOnly {
			if err := s.reset(ctx, name); err != nil {
				return err
			}
		}
	}
	for name := range s.settings.values {
		if strings.Contains(name, ".") {
			s.settings.values[name] = ""
		}
	}
	return nil
}

func (s *session) planShow(v *pg.VariableShowStmt) (*stmt, error) {
	name := strings.ToLower(v.Name)
	if name == "all" {
		cols := []pgwire.Column{pgwire.NewColumn("name", 25), pgwire.NewColumn("setting", 25), pgwire.NewColumn("description", 25)}
		return &stmt{columns: cols, run: func(ctx context.Context, _ []any) (pgwire.Result, error) {
			s.settings.refreshRole()
			names := make([]string, 0, len(knownSettings))
			for n := range knownSettings {
				names = append(names, n)
			}
			sort.Strings(names)
			rows := make([][]any, 0, len(names))
			for _, n := range names {
				rows = append(rows, []any{display(n), s.settings.values[n], knownSettings[n].description})
			}
			return pgwire.Result{Tag: "SHOW", Rows: pgwire.RowsFromSlice(cols, rows)}, nil
		}}, nil
	}
	if name == "transaction isolation level" {
		name = "transaction_isolation"
	}
	if _, known := knownSettings[name]; !known && !strings.Contains(name, ".") {
		return nil, errorf(pgwire.CodeUndefinedObject, "unrecognized configuration parameter %q", v.Name)
	}
	cols := []pgwire.Column{pgwire.NewColumn(display(name), 25)}
	return &stmt{columns: cols, run: func(ctx context.Context, _ []any) (pgwire.Result, error) {
		s.settings.refreshRole()
		value, ok := s.settings.values[name]
		if !ok {
			return pgwire.Result{}, errorf(pgwire.CodeUndefinedObject, "unrecognized configuration parameter %q", v.Name)
		}
		return pgwire.Result{Tag: "SHOW", Rows: pgwire.RowsFromSlice(cols, [][]any{{value}})}, nil
	}}, nil
}

func (s *session) planDiscard(d *pg.DiscardStmt) (*stmt, error) {
	switch d.Target {
	case pg.DiscardMode_DISCARD_ALL:
		return s.tagOnly("DISCARD ALL", func(ctx context.Context) error {
			if s.tx.status != pgwire.TxIdle {
				return errorf(pgwire.CodeActiveSQLTransaction, "DISCARD ALL cannot run inside a transaction block")
			}
			if err := s.resetAll(ctx); err != nil {
				return err
			}
			return s.temps.DropAll(ctx)
		}), nil
	case pg.DiscardMode_DISCARD_PLANS:
		return s.tagOnly("DISCARD PLANS", func(ctx context.Context) error { return nil }), nil
	case pg.DiscardMode_DISCARD_SEQUENCES:
		return s.tagOnly("DISCARD SEQUENCES", func(ctx context.Context) error { return nil }), nil
	case pg.DiscardMode_DISCARD_TEMP:
		return s.tagOnly("DISCARD TEMP", func(ctx context.Context) error {
			if s.tx.status != pgwire.TxIdle {
				return errorf(pgwire.CodeActiveSQLTransaction, "DISCARD TEMP cannot run inside a transaction block")
			}
			return s.temps.DropAll(ctx)
		}), nil
	}
	return nil, unsupported("DISCARD")
}

// Transaction-scoped settings. PostgreSQL undoes a block's SETs when the
// block rolls back, and SET LOCAL's at the end of the block either way.
// txSettings records, for the open block, what to restore.
type txSettings struct {
	// atBegin holds the value each setting changed in the block had when
	// the block began (its first change records it).
	atBegin map[string]string
	// session holds, for each setting changed with SET LOCAL in the block,
	// the value it returns to at the end of the block: its value before the
	// first SET LOCAL, or the last plain SET in the block after it.
	session map[string]string
}

// noteChange records a change of name in an open block, before it happens.
func (s *session) noteSettingChange(name string, local bool) {
	if s.tx.status == pgwire.TxIdle {
		return
	}
	ts := &s.settings.tx
	if ts.atBegin == nil {
		ts.atBegin, ts.session = map[string]string{}, map[string]string{}
	}
	cur := s.settings.values[name]
	if _, ok := ts.atBegin[name]; !ok {
		ts.atBegin[name] = cur
	}
	if _, ok := ts.session[name]; local && !ok {
		ts.session[name] = cur
	}
}

// endSettingsTx restores settings at the end of a transaction block: the
// block's SET LOCALs always, and all its SETs when it did not commit.
func (s *session) endSettingsTx(ctx context.Context, committed bool) {
	ts := s.settings.tx
	s.settings.tx = txSettings{}
	restore := ts.session
	if !committed {
		restore = ts.atBegin
	}
	for name, value := range restore {
		// The value was valid when it was set; a failure to apply it again
		// (a time zone DuckDB no longer takes) leaves the setting as it is.
		_ = s.applySetting(ctx, name, value)
	}
}

// planSetConfig plans SELECT set_config(name, value, is_local) with
// constant arguments as the SET (or SET LOCAL) it is, returning the new
// value as PostgreSQL does. ok is false for any other statement.
func (s *session) planSetConfig(node *pg.Node) (*stmt, bool) {
	sel := node.GetSelectStmt()
	if sel == nil || len(sel.TargetList) != 1 || len(sel.FromClause) > 0 || sel.WhereClause != nil || sel.Op != pg.SetOperation_SETOP_NONE {
		return nil, false
	}
	rt := sel.TargetList[0].GetResTarget()
	fc := rt.GetVal().GetFuncCall()
	if fc == nil || len(fc.Args) != 3 {
		return nil, false
	}
	if schema, name := pg.FuncName(fc); name != "set_config" || (schema != "" && schema != "pg_catalog") {
		return nil, false
	}
	var args [3]string
	for i, a := range fc.Args {
		v, err := settingValue([]*pg.Node{a})
		if err != nil {
			return nil, false
		}
		args[i] = v
	}
	local := false
	switch strings.ToLower(args[2]) {
	case "on", "true", "t":
		local = true
	case "off", "false", "f":
	default:
		return nil, false
	}
	colName := "set_config"
	if rt.Name != "" {
		colName = rt.Name
	}
	cols := []pgwire.Column{pgwire.NewColumn(colName, 25)}
	name := strings.ToLower(args[0])
	return &stmt{columns: cols, run: func(ctx context.Context, _ []any) (pgwire.Result, error) {
		if err := s.checkTx(); err != nil {
			return pgwire.Result{}, err
		}
		// Outside a block, a local change ends with the statement's
		// implicit transaction: nothing changes.
		switch {
		case !local:
			if err := s.set(ctx, name, args[1]); err != nil {
				return pgwire.Result{}, err
			}
		case s.tx.status != pgwire.TxIdle:
			s.noteSettingChange(name, true)
			if err := s.applySetting(ctx, name, args[1]); err != nil {
				return pgwire.Result{}, err
			}
		}
		value := args[1]
		if v, ok := s.settings.values[name]; ok && (!local || s.tx.status != pgwire.TxIdle) {
			value = v
		}
		return pgwire.Result{Rows: pgwire.RowsFromSlice(cols, [][]any{{value}})}, nil
	}}, true
}
