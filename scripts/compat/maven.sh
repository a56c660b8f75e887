# Maven for the Java suites (curator, curator-suites), sourced by their run.sh after they set
# HERE (the folder with pom.xml), M2 (the local repository) and BUILD (the build directory).
# Needs Maven 3.8+ and Java 17 on PATH.

command -v mvn >/dev/null || { echo "run.sh: mvn not found (Maven 3.8+ and Java 17 are needed)" >&2; exit 1; }
command -v java >/dev/null || { echo "run.sh: java not found (Java 17 is needed)" >&2; exit 1; }

MVN=(mvn -B -q -Dstyle.color=never "-Dmaven.repo.local=$M2" "-Dcompat.buildDirectory=$BUILD" -f "$HERE/pom.xml")
# Maven 3.8 prints stray ANSI resets even in batch mode; drop them (pipefail keeps mvn's status).
strip_ansi() { sed -u 's/\x1b\[[0-9;]*m//g'; }

# Compiles and resolves everything `mvn test` needs, surefire's JUnit platform provider
# included, by running the test phase with no test selected, so that no test pays for it.
maven_install() {
  echo "== installing Maven dependencies into $M2"
  mkdir -p "$M2"
  timeout --kill-after=30 "${CURATOR_INSTALL_TIMEOUT:-1200}" "${MVN[@]}" test-compile \
    org.apache.maven.plugins:maven-surefire-plugin:3.5.2:test \
    -Dtest=NoSuchTest -Dsurefire.failIfNoSpecifiedTests=false 2>&1 | strip_ansi
}
