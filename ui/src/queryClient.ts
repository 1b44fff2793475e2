import { MutationCache, QueryCache, QueryClient } from "@tanstack/react-query";
import { isDatabaseError, isSignedOut } from "./api";

/**
 * The console's query client. A command refused because the session is gone, or failing in the
 * database (a connection the server ended looks like that first), asks for the console's status
 * again: the status checks whether the database still accepts the role, and if not ends the
 * session and brings up the sign-in dialog over the views (they stay mounted, so nothing typed
 * is lost).
 */
export function makeQueryClient(): QueryClient {
  const onError = (error: unknown) => {
    if (isSignedOut(error) || isDatabaseError(error)) void client.invalidateQueries({ queryKey: ["status"] });
  };
  const client: QueryClient = new QueryClient({
    // (The status query itself never asks again: no loop while the database is down.)
    queryCache: new QueryCache({ onError: (error, query) => query.queryKey[0] !== "status" && onError(error) }),
    mutationCache: new MutationCache({ onError }),
    defaultOptions: {
      queries: { retry: false, refetchOnWindowFocus: false, staleTime: 5_000 },
      mutations: { retry: false },
    },
  });
  return client;
}
