/** A worker module that cannot start: it throws while loading, before it reads any message. */
throw new Error('this leaf worker cannot start');
