import { MutationCache, QueryCache, QueryClient } from "@tanstack/react-query";
import { isSignedOut } from "./api";

/**
 * The console's query client. A command refused because the session is gone asks for the
 * console's status again, which ends the session and brings up the sign-in dialog over the views
 * (they stay mounted, so nothing typed is lost).
 */
export function makeQueryClient(): QueryClient {
  const onError = (error: unknown) => {
    if (isSignedOut(error)) void client.invalidateQueries({ queryKey: ["status"] });
  };
  const client: QueryClient = new QueryClient({
    queryCache: new QueryCache({ onError }),
    mutationCache: new MutationCache({ onError }),
    defaultOptions: {
      queries: { retry: false, refetchOnWindowFocus: false, staleTime: 5_000 },
      mutations: { retry: false },
    },
  });
  return client;
}
