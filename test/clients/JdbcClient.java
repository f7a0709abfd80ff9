// A pgjdbc client for mink's end-to-end tests (cmd/mink/sql_e2e_test.go).
//
// Usage: java -cp /usr/share/java/postgresql.jar JdbcClient.java URL TABLE
//
// Connects, creates TABLE, inserts with PreparedStatement (setInt,
// setString, setTimestamp, setBigDecimal, setBoolean, setNull, batches),
// queries, and reads DatabaseMetaData getTables and getColumns. Prints "ok"
// and exits 0, or prints what differed and exits 1. The table must not
// exist. Run in single-file source mode, so it needs no build step.

import java.math.BigDecimal;
import java.sql.*;
import java.util.*;

public class JdbcClient {
    static final List<String> failures = new ArrayList<>();

    interface Step {
        void run() throws SQLException;
    }

    // step runs one part of the test; an exception fails that part only,
    // so that one missing feature does not hide the others.
    static void step(String name, Step s) {
        try {
            s.run();
        } catch (SQLException e) {
            failures.add(name + ": SQLException " + e.getSQLState() + ": " + e.getMessage());
        }
    }

    static void check(String what, Object got, Object want) {
        if (!Objects.equals(got, want)) {
            failures.add(what + ": got " + got + ", want " + want);
        }
    }

    public static void main(String[] args) throws Exception {
        String url = args[0], table = args[1];
        try (Connection conn = DriverManager.getConnection(url)) {
            run(conn, table);
        } catch (SQLException e) {
            failures.add("connect: SQLException " + e.getSQLState() + ": " + e.getMessage());
        }
        if (!failures.isEmpty()) {
            failures.forEach(System.out::println);
            System.exit(1);
        }
        System.out.println("ok");
    }

    static final Timestamp ts = Timestamp.valueOf("2024-05-06 07:08:09.123456");

    static void run(Connection conn, String table) throws SQLException {
        try (Statement st = conn.createStatement()) {
            st.execute("CREATE TABLE " + table + " (id integer NOT NULL, name varchar(20), "
                    + "tstz timestamptz, amount numeric(10,2), flag boolean, big bigint)");
        }
        step("insert", () -> insert(conn, table));
        step("timestamp", () -> timestamp(conn, table + "_ts"));
        step("query", () -> query(conn, table));
        step("errors", () -> errors(conn, table));
        step("transactions", () -> transactions(conn, table));
        step("metadata", () -> metadata(conn, table));
    }

    static void insert(Connection conn, String table) throws SQLException {
        String insert = "INSERT INTO " + table + " (id, name, tstz, amount, flag, big) VALUES (?, ?, ?, ?, ?, ?)";
        // More executions than pgjdbc's prepareThreshold (5), so that it
        // switches to a named server-side statement and binary transfer.
        try (PreparedStatement ps = conn.prepareStatement(insert)) {
            for (int i = 1; i <= 8; i++) {
                ps.setInt(1, i);
                ps.setString(2, "name " + i);
                ps.setTimestamp(3, ts);
                ps.setBigDecimal(4, new BigDecimal("1.25").multiply(BigDecimal.valueOf(i)));
                ps.setBoolean(5, i % 2 == 0);
                ps.setLong(6, 10_000_000_000L + i);
                check("executeUpdate " + i, ps.executeUpdate(), 1);
            }
        }
        try (PreparedStatement ps = conn.prepareStatement(insert)) {
            for (int i = 9; i <= 11; i++) {
                ps.setInt(1, i);
                ps.setNull(2, Types.VARCHAR);
                ps.setNull(3, Types.TIMESTAMP);
                ps.setNull(4, Types.NUMERIC);
                ps.setNull(5, Types.BOOLEAN);
                ps.setNull(6, Types.BIGINT);
                ps.addBatch();
            }
            int[] counts = ps.executeBatch();
            check("batch size", counts.length, 3);
        }
    }

    // setTimestamp into a timestamp (without time zone) column: pgjdbc sends
    // the value as text with the JVM zone's offset and an unspecified type,
    // and PostgreSQL's timestamp input ignores the offset.
    static void timestamp(Connection conn, String table) throws SQLException {
        try (Statement st = conn.createStatement()) {
            st.execute("CREATE TABLE " + table + " (id integer, ts timestamp)");
        }
        try (PreparedStatement ps = conn.prepareStatement("INSERT INTO " + table + " VALUES (?, ?)")) {
            ps.setInt(1, 1);
            ps.setTimestamp(2, ts);
            check("timestamp executeUpdate", ps.executeUpdate(), 1);
        }
        try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery("SELECT ts FROM " + table)) {
            check("timestamp row", rs.next(), true);
            check("timestamp value", rs.getTimestamp(1), ts);
        }
    }

    static void query(Connection conn, String table) throws SQLException {

        try (PreparedStatement ps = conn.prepareStatement(
                "SELECT id, name, tstz, amount, flag, big FROM " + table + " WHERE id <= ? ORDER BY id")) {
            for (int round = 0; round < 6; round++) { // again past prepareThreshold
                ps.setInt(1, 11);
                int n = 0;
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        n++;
                        int id = rs.getInt(1);
                        check("id", id, n);
                        if (id <= 8) {
                            check("name", rs.getString(2), "name " + id);
                            check("tstz", rs.getTimestamp(3), ts);
                            check("amount", rs.getBigDecimal(4), new BigDecimal("1.25").multiply(BigDecimal.valueOf(id)));
                            check("flag", rs.getBoolean(5), id % 2 == 0);
                            check("big", rs.getLong(6), 10_000_000_000L + id);
                        } else {
                            check("null name", rs.getString(2), null);
                            rs.getTimestamp(3);
                            check("null tstz", rs.wasNull(), true);
                            check("null amount", rs.getBigDecimal(4), null);
                        }
                    }
                }
                check("rows in round " + round, n, 11);
            }
        }
        try (Statement st = conn.createStatement();
             ResultSet rs = st.executeQuery("SELECT count(*), sum(amount) FROM " + table)) {
            rs.next();
            check("count", rs.getLong(1), 11L);
            check("sum", rs.getBigDecimal(2), new BigDecimal("45.00"));
            check("count type", rs.getMetaData().getColumnType(1), Types.BIGINT);
        }
    }

    static void errors(Connection conn, String table) throws SQLException {

        // Errors carry PostgreSQL's SQLSTATE.
        String[][] errors = {
            {"SELECT * FROM no_such_table", "42P01"},
            {"SELECT nope FROM " + table, "42703"},
            {"INSERT INTO " + table + " (name) VALUES ('x')", "23502"},
            {"INSERT INTO " + table + " (id, name) VALUES (1, 'this is longer than twenty')", "22001"},
            {"DELETE FROM " + table, "0A000"},
        };
        for (String[] e : errors) {
            try (Statement st = conn.createStatement()) {
                st.execute(e[0]);
                failures.add(e[0] + ": no error, want " + e[1]);
            } catch (SQLException ex) {
                check(e[0] + " SQLState", ex.getSQLState(), e[1]);
            }
        }

    }

    // Transactions through the JDBC API.
    static void transactions(Connection conn, String table) throws SQLException {
        conn.setAutoCommit(false);
        try (Statement st = conn.createStatement()) {
            st.executeUpdate("INSERT INTO " + table + " (id) VALUES (100)");
            conn.rollback();
            st.executeUpdate("INSERT INTO " + table + " (id) VALUES (101)");
            conn.commit();
        }
        conn.setAutoCommit(true);
        try (Statement st = conn.createStatement();
             ResultSet rs = st.executeQuery("SELECT id FROM " + table + " WHERE id >= 100 ORDER BY id")) {
            List<Integer> ids = new ArrayList<>();
            while (rs.next()) ids.add(rs.getInt(1));
            check("ids after rollback and commit", ids, List.of(101));
        }
    }

    // DatabaseMetaData, as BI tools and IDEs call it.
    static void metadata(Connection conn, String table) throws SQLException {
        DatabaseMetaData md = conn.getMetaData();
        check("database product", md.getDatabaseProductName(), "PostgreSQL");
        boolean found = false;
        try (ResultSet rs = md.getTables(null, "public", "%", new String[] {"TABLE"})) {
            while (rs.next()) {
                if (rs.getString("TABLE_NAME").equals(table)) {
                    found = true;
                    check("getTables TABLE_SCHEM", rs.getString("TABLE_SCHEM"), "public");
                    check("getTables TABLE_TYPE", rs.getString("TABLE_TYPE"), "TABLE");
                }
            }
        }
        check("getTables lists " + table, found, true);
        List<String> cols = new ArrayList<>();
        try (ResultSet rs = md.getColumns(null, "public", table, "%")) {
            while (rs.next()) {
                cols.add(rs.getString("COLUMN_NAME") + " " + rs.getString("TYPE_NAME") + " " + rs.getInt("DATA_TYPE")
                        + " " + rs.getInt("COLUMN_SIZE") + " " + rs.getString("IS_NULLABLE") + " " + rs.getInt("ORDINAL_POSITION"));
            }
        }
        check("getColumns", cols, List.of(
                "id int4 " + Types.INTEGER + " 10 NO 1",
                "name varchar " + Types.VARCHAR + " 20 YES 2",
                "tstz timestamptz " + Types.TIMESTAMP + " 35 YES 3",
                "amount numeric " + Types.NUMERIC + " 10 YES 4",
                "flag bool " + Types.BIT + " 1 YES 5",
                "big int8 " + Types.BIGINT + " 19 YES 6"));

        // A schema of its own: getSchemas lists it, getTables and
        // getColumns take it, and the connection's currentSchema
        // (search_path) makes its table the unqualified one.
        String schema = table + "_schema";
        try (Statement st = conn.createStatement()) {
            st.execute("CREATE SCHEMA " + schema);
            st.execute("CREATE TABLE " + schema + "." + table + " (k bigint, note text)");
            st.execute("INSERT INTO " + schema + "." + table + " VALUES (1, 'in " + schema + "')");
        }
        List<String> schemas = new ArrayList<>();
        try (ResultSet rs = md.getSchemas()) {
            while (rs.next()) schemas.add(rs.getString("TABLE_SCHEM"));
        }
        check("getSchemas lists " + schema, schemas.contains(schema) && schemas.contains("public"), true);
        List<String> tables = new ArrayList<>();
        try (ResultSet rs = md.getTables(null, schema, "%", new String[] {"TABLE"})) {
            while (rs.next()) tables.add(rs.getString("TABLE_SCHEM") + "." + rs.getString("TABLE_NAME"));
        }
        check("getTables of " + schema, tables, List.of(schema + "." + table));
        List<String> schemaCols = new ArrayList<>();
        try (ResultSet rs = md.getColumns(null, schema, table, "%")) {
            while (rs.next()) schemaCols.add(rs.getString("COLUMN_NAME") + " " + rs.getString("TYPE_NAME"));
        }
        check("getColumns of " + schema + "." + table, schemaCols, List.of("k int8", "note text"));
        conn.setSchema(schema);
        check("getSchema", conn.getSchema(), schema);
        try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery("SELECT note FROM " + table)) {
            check("unqualified read under currentSchema", rs.next() ? rs.getString(1) : null, "in " + schema);
        }
        conn.setSchema("public");
    }
}
