package warden.compat.curatorsuites;

import org.junit.platform.engine.support.descriptor.MethodSource;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;

/**
 * The test now running, as `Class#method`, so that ExternalServerMain can name each server's
 * directory after the test that started it (registered through META-INF/services).
 */
public class CurrentTest implements TestExecutionListener {
    private static volatile String current = "setup";

    public static String name() {
        return current;
    }

    @Override
    public void executionStarted(TestIdentifier test) {
        test.getSource()
                .filter(MethodSource.class::isInstance)
                .map(MethodSource.class::cast)
                .ifPresent(m -> current = m.getClassName().substring(m.getClassName().lastIndexOf('.') + 1)
                        + "#" + m.getMethodName());
    }
}
