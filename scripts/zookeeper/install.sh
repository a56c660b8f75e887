#!/usr/bin/env bash
# Idempotently install Apache ZooKeeper 3.9.5 (server + Java client jars and their runtime
# dependencies) from Maven Central into ${WARDEN_CACHE:-$REPO/.cache}/zookeeper-3.9.5/lib.
#
# The Admin Server (Jetty) is not installed; run.sh disables it (zookeeper.admin.enableServer=false).
# Logging: ZooKeeper 3.9 depends on slf4j-api + logback; we exclude logback and use
# slf4j-simple instead (configured through -D system properties in run.sh), so no logback.xml or
# log4j configuration file is needed.
#
# Prints the install directory on stdout (and nothing else on stdout).
# Needs: mvn (3.8+), java 11+ (17 tested). Network: Maven Central only.
set -euo pipefail

ZK_VERSION=3.9.5
SLF4J_VERSION=2.0.13   # must match the slf4j-api that zookeeper 3.9.5 pulls in (2.0.13)

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${WARDEN_CACHE:-$REPO/.cache}"
DEST="$CACHE/zookeeper-$ZK_VERSION"
STAMP="$DEST/.installed"

WANT="zookeeper=$ZK_VERSION slf4j-simple=$SLF4J_VERSION extras=2"
if [[ -f "$STAMP" ]] && [[ "$(head -n1 "$STAMP")" == "$WANT" ]] \
   && [[ -f "$DEST/lib/zookeeper-$ZK_VERSION.jar" ]]; then
  echo "$DEST"
  exit 0
fi

command -v mvn >/dev/null || { echo "install.sh: mvn not found" >&2; exit 1; }
command -v java >/dev/null || { echo "install.sh: java not found" >&2; exit 1; }

mkdir -p "$DEST"
WORK="$DEST/.build"
rm -rf "$WORK" "$DEST/lib.tmp"
mkdir -p "$WORK"

cat > "$WORK/pom.xml" <<POM
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 http://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>warden.local</groupId>
  <artifactId>zookeeper-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.zookeeper</groupId>
      <artifactId>zookeeper</artifactId>
      <version>$ZK_VERSION</version>
      <exclusions>
        <exclusion><groupId>ch.qos.logback</groupId><artifactId>logback-classic</artifactId></exclusion>
        <exclusion><groupId>ch.qos.logback</groupId><artifactId>logback-core</artifactId></exclusion>
      </exclusions>
    </dependency>
    <!-- "provided" in zookeeper's pom but shipped in the binary tarball's lib/ and needed at
         run time (metrics-core by ServerMetrics, snappy by snapshot compression, commons-cli by
         some tools, jline by zkCli). Versions are the ones zookeeper-parent 3.9.5 pins. -->
    <dependency><groupId>io.dropwizard.metrics</groupId><artifactId>metrics-core</artifactId><version>4.1.12.1</version></dependency>
    <dependency><groupId>org.xerial.snappy</groupId><artifactId>snappy-java</artifactId><version>1.1.10.5</version></dependency>
    <dependency><groupId>commons-cli</groupId><artifactId>commons-cli</artifactId><version>1.5.0</version></dependency>
    <dependency><groupId>org.jline</groupId><artifactId>jline</artifactId><version>3.25.1</version></dependency>
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-simple</artifactId>
      <version>$SLF4J_VERSION</version>
    </dependency>
  </dependencies>
</project>
POM

# Plugin version pinned so the result does not depend on Maven's default bindings.
( cd "$WORK" && timeout "${MVN_TIMEOUT:-900}" mvn -B -q -Dstyle.color=never -f pom.xml \
    org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$DEST/lib.tmp" ) >&2

if ! ls "$DEST"/lib.tmp/zookeeper-$ZK_VERSION.jar >/dev/null 2>&1; then
  echo "install.sh: zookeeper-$ZK_VERSION.jar missing after mvn copy-dependencies" >&2
  exit 1
fi
if ls "$DEST"/lib.tmp/logback-*.jar >/dev/null 2>&1; then
  echo "install.sh: logback slipped in; remove it" >&2
  rm -f "$DEST"/lib.tmp/logback-*.jar
fi
rm -rf "$DEST/lib"
mv "$DEST/lib.tmp" "$DEST/lib"
rm -rf "$WORK"
( cd "$DEST/lib" && ls -1 *.jar ) > "$DEST/jars.txt"
printf '%s\n%s\n' "$WANT" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$STAMP"
echo "$DEST"
