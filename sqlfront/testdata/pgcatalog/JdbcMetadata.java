// Prints what pgjdbc's DatabaseMetaData reports for the catalog test
// tables (see TestCatalogJDBC). Run as a single-file program:
//
//	java -cp /usr/share/java/postgresql.jar JdbcMetadata.java jdbc:postgresql://host:port/mink?user=mink
import java.sql.*;

public class JdbcMetadata {
    static void dump(String title, ResultSet rs) throws SQLException {
        System.out.println("== " + title);
        ResultSetMetaData md = rs.getMetaData();
        StringBuilder header = new StringBuilder();
        for (int i = 1; i <= md.getColumnCount(); i++) {
            header.append(i > 1 ? "|" : "").append(md.getColumnLabel(i));
        }
        System.out.println(header);
        while (rs.next()) {
            StringBuilder row = new StringBuilder();
            for (int i = 1; i <= md.getColumnCount(); i++) {
                row.append(i > 1 ? "|" : "").append(rs.getString(i));
            }
            System.out.println(row);
        }
        rs.close();
    }

    public static void main(String[] args) throws Exception {
        try (Connection c = DriverManager.getConnection(args[0])) {
            DatabaseMetaData m = c.getMetaData();
            System.out.println("product: " + m.getDatabaseProductName() + " " + m.getDatabaseMajorVersion() + "." + m.getDatabaseMinorVersion());
            System.out.println("user: " + m.getUserName());
            dump("getTables(null, null, %, {TABLE, PARTITIONED TABLE})", m.getTables(null, null, "%", new String[] {"TABLE", "PARTITIONED TABLE"}));
            dump("getTables(null, public, null, null)", m.getTables(null, "public", null, null));
            dump("getTables(null, null, ord%, null)", m.getTables(null, null, "ord%", null));
            dump("getColumns(null, public, %, %)", m.getColumns(null, "public", "%", "%"));
            dump("getColumns(null, null, orders, c%)", m.getColumns(null, null, "orders", "c%"));
            dump("getSchemas()", m.getSchemas());
            dump("getCatalogs()", m.getCatalogs());
            dump("getPrimaryKeys(null, public, orders)", m.getPrimaryKeys(null, "public", "orders"));
            dump("getIndexInfo(null, public, orders, false, true)", m.getIndexInfo(null, "public", "orders", false, true));
            dump("getPrimaryKeys(null, public, accounts)", m.getPrimaryKeys(null, "public", "accounts"));
            dump("getIndexInfo(null, public, accounts, false, true)", m.getIndexInfo(null, "public", "accounts", false, true));
            dump("getIndexInfo(null, public, accounts, true, true)", m.getIndexInfo(null, "public", "accounts", true, true));
            try (PreparedStatement ps = c.prepareStatement("SELECT typname, typlen FROM pg_catalog.pg_type WHERE oid = ?")) {
                ps.setInt(1, 1700);
                dump("pg_type where oid = 1700", ps.executeQuery());
            }
        }
    }
}
